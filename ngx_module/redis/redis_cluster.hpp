// A worker's view of a Redis Cluster: the slot map, asked of any node that
// answers (CLUSTER SLOTS), and one RedisConnection per master, opened when
// a call first goes to it.  The one place that follows the cluster's word
// on a keyed call: MOVED updates the map (if it names a node of the map),
// refreshes it soon (at most every kRefreshMs) and sends the call there;
// ASK sends it there once; TRYAGAIN sends it again a moment later;
// CLUSTERDOWN refreshes the map.  A node that fails is left alone for a
// while (50 ms doubling to 500 ms: calls for it fail at once) and the map
// is refreshed.  The nodes kept are the last map's and a few a redirect
// named (kMaxExtraNodes); a new map forgets the others, closing their
// connections.
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

    void ask_first_map() noexcept;
    void shutdown() noexcept;

    // A slot map is known.
    bool up() const noexcept { return loaded_; }

    // Asked before a call is sent again: false if nobody waits for its
    // answer any more; its handler then gets nullptr, and nothing is sent.
    using StillWanted = bool (*)(void *data) noexcept;

    // A call whose keys are all in `slot`, to the slot's master.  MOVED,
    // ASK and TRYAGAIN (the call did not run) are followed, up to
    // kMaxRedirects in all, while `wanted` (nullptr: always); `handler`
    // gets the last reply, or nullptr.  False, with nothing sent, if no
    // node serves the slot, the node failed a moment ago, or no memory.
    bool send_keyed(std::uint16_t slot, std::string_view command,
                    RedisConnection::ReplyHandler handler, StillWanted wanted,
                    void *data) noexcept;

    // Redirects a call follows at most; TRYAGAIN (a slot half moved) sends
    // it again this much later (ms).
    static constexpr ngx_uint_t kMaxRedirects = 3;
    static constexpr ngx_msec_t kTryAgainMs = 20;

    // The master of `slot`, as an index that stays the same until the map
    // is asked for again; SlotMap::kNoNode if none.
    std::uint16_t node_of(std::uint16_t slot) const noexcept
    {
        return map_.node_of(slot);
    }

    // The master of `slot` has the Redis module's command, as its
    // connection found (false until it has answered); module_command_lost():
    // it answered that it no longer has it.
    bool has_module_command(std::uint16_t slot) const noexcept;
    void module_command_lost(std::uint16_t slot) noexcept;

    // The address of the map's n-th master (modulo their number), for a
    // connection of another kind (Pub/Sub); false if it has none (or no
    // map): the caller tries the next one later.
    bool master_peer(ngx_uint_t n, RedisConnection::Peer *peer) const noexcept;

    // Asks for the map again soon: after CLUSTERDOWN, a node lost.
    void refresh() noexcept;

    void check_stall(ngx_msec_t stall_ms) noexcept;

    static constexpr ngx_msec_t kRefreshMs = 100;

    // Nodes a redirect names that the slot map does not (a replica just
    // promoted, a slot's new master before the map says so, or a broken
    // node's invention), kept beside the map's: at most this many at once,
    // the least recently redirected to closed to make room, and at most
    // this many made for each slot map taken, so that a node naming a new
    // address in every reply costs a worker a few connections for each map
    // (asked for again at most every kRefreshMs after a MOVED), not one for
    // each call, and a few Node records, not one for each address named.
    static constexpr ngx_uint_t kMaxExtraNodes = 4;

private:
    // One master: its address and its connection.
    struct Node final : public RedisConnection::Owner {
        Node(RedisCluster *cluster, std::string_view host, int port) noexcept;

        void on_open(RedisConnection *conn) noexcept override;
        void on_close(RedisConnection *conn) noexcept override;
        bool ready() noexcept;
        RedisConnection::Peer peer() const noexcept;

        RedisCluster *cluster;
        RedisConnection conn;
        DecideProbe probe;          // of conn, asked as it opens
        std::string host;           // as the cluster announced it: what
                                    // its certificate is checked against
        int port;
        ngx_sockaddr_t addr;
        socklen_t addr_len = 0;
        u_char text[NGX_SOCKADDR_STRLEN];
        ngx_str_t display;
        ngx_uint_t failures = 0;
        ngx_msec_t retry_at = 0;    // no connect before this
        bool extra = false;         // a redirect's, not the map's
        bool named = false;         // by the map being taken
        ngx_uint_t used = 0;        // the cluster's uses_ when last named
    };

    // A keyed call in flight, or waiting to be sent again after TRYAGAIN
    // (then in try_again_calls_): it keeps its command for that.
    struct KeyedCall {
        RedisCluster *cluster;
        std::string command;
        std::uint16_t slot;
        ngx_uint_t redirects;
        RedisConnection::ReplyHandler handler;
        StillWanted wanted;
        void *data;
        ngx_event_t try_again;
        ngx_queue_t queue;
    };

    Node *known(std::string_view host, int port) const noexcept;
    Node *node(std::string_view host, int port) noexcept;
    void retire(Node *n) noexcept;
    static void on_reap(ngx_event_t *ev) noexcept;
    bool follow_redirect(KeyedCall *call, const Redirect &to) noexcept;
    bool follow(KeyedCall *call, const Reply *reply) noexcept;
    void finish(KeyedCall *call, const Reply *reply) noexcept;
    static void on_keyed_reply(void *data, const Reply *reply) noexcept;
    static void on_try_again(ngx_event_t *ev) noexcept;
    Node *master_of(std::uint16_t slot) const noexcept;
    void ask_next() noexcept;
    void take_map(const Reply *reply) noexcept;
    void on_open(RedisConnection *conn) noexcept override;
    void on_close(RedisConnection *conn) noexcept override;
    static void on_slots(void *data, const Reply *reply) noexcept;
    static void on_refresh(ngx_event_t *ev) noexcept;

    const RedisTarget &target_;
    const RedisTls *tls_;
    LogThrottle *throttle_;
    ngx_log_t *log_;
    bool loaded_ = false;
    bool closing_ = false;
    SlotMap map_;
    std::vector<Node *> node_of_;           // by map_'s node index
    std::vector<std::unique_ptr<Node>> nodes_;  // the map's, the extra ones
    std::vector<Node *> extras_;            // of nodes_, kMaxExtraNodes
    ngx_uint_t extras_made_ = 0;            // since the map was taken
    ngx_uint_t uses_ = 0;                   // extra nodes' clock
    std::vector<std::unique_ptr<Node>> retired_;  // closed, freed by reap_
    ngx_event_t reap_;
    RedisConnection asking_;                // CLUSTER SLOTS, to one node
    ngx_uint_t next_seed_ = 0;              // seeds, then known nodes
    ngx_uint_t asked_ = 0;
    ngx_msec_t last_refresh_ = 0;
    ngx_uint_t failures_ = 0;
    ngx_event_t refresh_timer_;
    ngx_queue_t try_again_calls_;           // of KeyedCall
};

}  // namespace ratelimit
