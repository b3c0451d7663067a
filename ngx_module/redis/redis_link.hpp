// A worker's data link to Redis: finds the server (the configured address,
// a host name resolved again on each reconnect, or the master the sentinels
// name), keeps one RedisConnection to it, and reconnects with backoff.
#pragma once

#include <memory>

#include "cluster/cluster_slot.hpp"
#include "redis/decide_probe.hpp"
#include "redis/redis_cluster.hpp"
#include "redis/redis_connection.hpp"
#include "redis/sentinel_query.hpp"

namespace ratelimit {

class RedisLink final : public RedisConnection::Owner {
public:
    RedisLink(const MainConf &mcf, ngx_log_t *log) noexcept;
    ~RedisLink();

    RedisLink(const RedisLink &) = delete;
    RedisLink &operator=(const RedisLink &) = delete;

    // Called each time the link comes up, before any call is sent on it
    // (the batcher loads its script then), in the order added; false if
    // kMaxListeners are added already.
    using UpHandler = void (*)(void *data) noexcept;
    bool on_up(UpHandler handler, void *data) noexcept;

    static constexpr ngx_uint_t kMaxListeners = 4;

    // Called at each sign that Redis cannot be reached: a connection lost,
    // refused or timed out, no master found, a request's wait run out.
    // One listener; another replaces it.
    void on_trouble(UpHandler handler, void *data) noexcept
    {
        trouble_ = {handler, data};
    }

    void connect_first() noexcept;

    // Closes the connection for good: waiting handlers get nullptr.
    void shutdown() noexcept;

    // Connected to the server (to the master, checked by ROLE, with
    // sentinels), or a cluster's slot map known: commands may be sent.
    bool up() const noexcept { return cluster_ ? cluster_->up() : up_; }

    // Redis is a cluster: keys are routed by slot.
    bool clustered() const noexcept { return cluster_ != nullptr; }

    // The master of `slot` in a cluster, as an index that stays the same
    // until the slot map is asked for again (SlotMap::kNoNode if none); 0
    // for one server.
    std::uint16_t master_index(std::uint16_t slot) const noexcept
    {
        return cluster_ ? cluster_->node_of(slot) : 0;
    }

    // The server of `slot` (the one server, or the slot's master) has the
    // Redis module's command, as its connection's probe found when it
    // opened (decide_probe.hpp).
    bool has_module_command(std::uint16_t slot) const noexcept
    {
        return cluster_ ? cluster_->has_module_command(slot)
                        : probe_.available();
    }

    // That server answered that it no longer knows the command.
    void module_command_lost(std::uint16_t slot) noexcept
    {
        if (cluster_) {
            cluster_->module_command_lost(slot);
        } else {
            probe_.lost();
        }
    }

    // A command not about keys, to the one server (not to a cluster).
    bool send_to_server(std::string_view command,
                        RedisConnection::ReplyHandler handler,
                        void *data) noexcept
    {
        return up_ && conn_.send(command, handler, data);
    }

    // A command whose keys are all in `slot` (any slot but in a cluster,
    // where the cluster follows its redirects: RedisCluster::send_keyed()).
    bool send_keyed(std::uint16_t slot, std::string_view command,
                    RedisConnection::ReplyHandler handler,
                    RedisCluster::StillWanted wanted, void *data) noexcept
    {
        return cluster_ ? cluster_->send_keyed(slot, command, handler, wanted,
                                               data)
                        : send_to_server(command, handler, data);
    }

    // The same, for the slot of `key`, answered whether wanted or not.
    bool send_for_key(std::string_view key, std::string_view command,
                      RedisConnection::ReplyHandler handler,
                      void *data) noexcept
    {
        return send_keyed(cluster_ ? key_slot(key) : 0, command, handler,
                          nullptr, data);
    }

    // A reply said the slot map may have changed under a call that the
    // cluster could not tell (a key refused inside a call, with no MOVED):
    // the map is asked for again soon.
    void slot_map_stale() noexcept
    {
        if (cluster_) {
            cluster_->refresh();
        }
    }

    // The server the link is connected to, while up(): for a connection of
    // another kind (Pub/Sub) to the same place.
    const RedisConnection::Peer &peer() const noexcept
    {
        return conn_.peer();
    }

    // A cluster's master for such a connection, the n-th: a message
    // published on any node reaches the subscribers of every node.  False
    // if none is known, or not a cluster.
    bool cluster_peer(ngx_uint_t n, RedisConnection::Peer *peer) const noexcept
    {
        return cluster_ && cluster_->up() && cluster_->master_peer(n, peer);
    }

    bool send_argv(int argc, const char **argv, const size_t *lens,
                   RedisConnection::ReplyHandler handler, void *data) noexcept
    {
        return up_ && conn_.send_argv(argc, argv, lens, handler, data);
    }

    // At most once a second, so a Redis outage under load is one log line a
    // second per worker, not one per request: the worker's other
    // connections to Redis (the subscriber's) share the throttle.
    bool may_log() noexcept { return throttle_.allow(); }
    LogThrottle *log_throttle() noexcept { return &throttle_; }

    // A request gave up waiting: a connection that has answered nothing for
    // kStallMs while calls wait is replaced.
    void on_request_timeout() noexcept
    {
        tell_trouble();

        if (cluster_) {
            cluster_->check_stall(kStallMs);
        } else {
            conn_.check_stall(kStallMs);
        }
    }

    // An error Redis answered.  -READONLY says the server cannot take
    // writes, a replica now after a failover: with sentinels, or a host
    // name resolved on reconnect, the link finds the master again.  (A
    // cluster's own errors are followed by the cluster.)
    void on_error_reply(std::string_view error) noexcept;

    // The server refused what the link is for (a script it cannot load):
    // dropped, and tried again with backoff.
    void reconnect() noexcept;

    const ngx_str_t &server() const noexcept { return conn_.display(); }

    static constexpr ngx_msec_t kStallMs = 2000;

private:
    void connect() noexcept;
    void resolve(const RedisAddress &address) noexcept;
    void connect_to(const sockaddr *sa, socklen_t len,
                    const ngx_str_t &display, const ngx_str_t &host) noexcept;
    void became_up() noexcept;
    void tell_trouble() noexcept;
    void log_master() noexcept;
    void schedule_reconnect() noexcept;
    void on_open(RedisConnection *conn) noexcept override;
    void on_close(RedisConnection *conn) noexcept override;
    static void on_role(void *data, const Reply *reply) noexcept;
    static void on_master(void *data, const sockaddr *sa, socklen_t len,
                          const ngx_str_t &text,
                          const ngx_str_t &host) noexcept;
    void connect_to_master(const sockaddr *sa, socklen_t len,
                           const ngx_str_t &text,
                           const ngx_str_t &host) noexcept;
    void on_check_answer(const sockaddr *sa, socklen_t len,
                         const ngx_str_t &text,
                         const ngx_str_t &host) noexcept;
    static void on_check(ngx_event_t *ev) noexcept;
    static void on_resolved(ngx_resolver_ctx_t *ctx) noexcept;
    static void on_reconnect(ngx_event_t *ev) noexcept;
    static void on_drop(ngx_event_t *ev) noexcept;

    const RedisTarget &target_;
    const RedisTls *tls_;
    ngx_resolver_t *resolver_;        // nullptr: names resolved at start
    ngx_msec_t resolver_timeout_;
    ngx_log_t *log_;
    LogThrottle throttle_;
    RedisConnection conn_;
    DecideProbe probe_;               // of conn_, asked as it comes up
    SentinelQuery sentinels_;         // asked only with `sentinel=`
    std::unique_ptr<RedisCluster> cluster_;  // only with `cluster`
    ngx_resolver_ctx_t *resolving_ = nullptr;

    bool up_ = false;
    bool closing_ = false;
    ngx_uint_t failures_ = 0;         // consecutive, for the backoff
    ngx_msec_t up_since_ = 0;
    ngx_event_t reconnect_timer_;
    ngx_event_t drop_;                // posted: close and find the server
    ngx_event_t check_timer_;         // asks the sentinels again, while up

    struct Listener {
        UpHandler handler;
        void *data;
    };

    Listener listeners_[kMaxListeners];
    ngx_uint_t listener_count_ = 0;
    Listener trouble_ = {nullptr, nullptr};

    // The address connected to, when found at run time (sentinels, DNS),
    // and the master last confirmed, to log a switch once.
    ngx_sockaddr_t addr_;
    socklen_t addr_len_ = 0;
    u_char addr_text_[NGX_SOCKADDR_STRLEN];
    ngx_str_t display_ = ngx_null_string;
    // The master's IP address as the sentinel gave it, NUL-terminated: what
    // its certificate is checked against.
    u_char master_host_[NGX_SOCKADDR_STRLEN];
    u_char master_text_[NGX_SOCKADDR_STRLEN];
    size_t master_len_ = 0;
};

}  // namespace ratelimit
