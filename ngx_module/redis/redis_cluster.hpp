// A worker's view of a Redis Cluster: the slot map, asked of any node that
// answers (CLUSTER SLOTS), and one RedisConnection per master, opened when
// a call first goes to it.  MOVED updates the map and refreshes it soon
// (at most every kRefreshMs); a node that fails is left alone for a while
// (50 ms doubling to 500 ms: calls for it fail at once) and the map is
// refreshed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_slot.hpp"
#include "redis/decide_probe.hpp"
#include "redis/redis_connection.hpp"

namespace ratelimit {

class RedisCluster final : public RedisConnection::Owner {
public:
    RedisCluster(const RedisTarget &target, const RedisTls *tls,
                 LogThrottle *throttle, ngx_log_t *log) noexcept;
    ~RedisCluster();

    RedisCluster(const RedisCluster &) = delete;
    RedisCluster &operator=(const RedisCluster &) = delete;

    void start() noexcept;
    void shutdown() noexcept;

    // A slot map is known.
    bool up() const noexcept { return loaded_; }

    // To the master of `slot`.  False, with nothing sent, if no node
    // serves it, the node failed a moment ago, or no memory.
    bool send(std::uint16_t slot, std::string_view command,
              RedisConnection::ReplyHandler handler, void *data) noexcept;

    // A call answered MOVED or ASK: the map learns a MOVED at once, and
    // the command goes where the redirect says (after ASKING for an ASK).
    // False if it could not be sent.  `from` is the slot's node that
    // answered, for a redirect that names no host.
    bool redirect(const Redirect &to, std::uint16_t from_slot,
                  std::string_view command,
                  RedisConnection::ReplyHandler handler, void *data) noexcept;

    // The master of `slot`, as an index that stays the same until the map
    // is asked for again; SlotMap::kNoNode if none.
    std::uint16_t node_of(std::uint16_t slot) const noexcept
    {
        return map_.node_of(slot);
    }

    // The master of `slot` has the Redis module's command, as its
    // connection found (false until it has answered); decide_lost(): it
    // answered that it no longer has it.
    bool decides(std::uint16_t slot) const noexcept;
    void decide_lost(std::uint16_t slot) noexcept;

    // The address of the map's n-th master (modulo their number), for a
    // connection of another kind (Pub/Sub); false if it has none (or no
    // map): the caller tries the next one later.
    bool master_peer(ngx_uint_t n, RedisConnection::Peer *peer) const noexcept;

    // Asks for the map again soon: after CLUSTERDOWN, a node lost.
    void refresh() noexcept;

    void check_stall(ngx_msec_t stall_ms) noexcept;

    static constexpr ngx_msec_t kRefreshMs = 100;

private:
    // One master: its address and its connection.
    struct Node final : public RedisConnection::Owner {
        Node(RedisCluster *cluster, std::string_view host, int port) noexcept;

        void on_open(RedisConnection *conn) noexcept override;
        void on_close(RedisConnection *conn) noexcept override;
        bool ready() noexcept;

        RedisCluster *cluster;
        RedisConnection conn;
        DecideProbe probe;          // of conn, asked as it opens
        std::string host;           // as the cluster announced it
        int port;
        ngx_sockaddr_t addr;
        socklen_t addr_len = 0;
        u_char text[NGX_SOCKADDR_STRLEN];
        ngx_str_t display;
        ngx_uint_t failures = 0;
        ngx_msec_t retry_at = 0;    // no connect before this
    };

    Node *node(std::string_view host, int port) noexcept;
    Node *master_of(std::uint16_t slot) const noexcept;
    void ask_next() noexcept;
    void take_map(const redisReply *reply) noexcept;
    void on_open(RedisConnection *conn) noexcept override;
    void on_close(RedisConnection *conn) noexcept override;
    static void on_slots(void *data, const redisReply *reply) noexcept;
    static void on_refresh(ngx_event_t *ev) noexcept;

    const RedisTarget &target_;
    const RedisTls *tls_;
    LogThrottle *throttle_;
    ngx_log_t *log_;
    bool loaded_ = false;
    bool closing_ = false;
    SlotMap map_;
    std::vector<Node *> node_of_;           // by map_'s node index
    std::vector<std::unique_ptr<Node>> nodes_;
    RedisConnection asking_;                // CLUSTER SLOTS, to one node
    ngx_uint_t next_seed_ = 0;              // seeds, then known nodes
    ngx_uint_t asked_ = 0;
    ngx_msec_t last_refresh_ = 0;
    ngx_uint_t failures_ = 0;
    ngx_event_t refresh_timer_;
};

}  // namespace ratelimit
