#include "redis/redis_cluster.hpp"

#include <new>
#include <string>

namespace ratelimit {

RedisCluster::Node::Node(RedisCluster *owner, std::string_view name,
                         int number) noexcept
    : cluster(owner), conn(this, owner->throttle_, owner->log_), port(number)
{
    display.data = text;
    display.len = 0;

    try {
        host.assign(name);
    } catch (...) {
        return;  // no address: never connected, calls for it fail
    }

    if (make_sockaddr(name, number, &addr, &addr_len)) {
        display.len = ngx_sock_ntop(&addr.sockaddr, addr_len, text,
                                    NGX_SOCKADDR_STRLEN, 1);
    } else if (owner->throttle_->allow()) {
        ngx_log_error(NGX_LOG_WARN, owner->log_, 0,
                      "ratelimit: redis cluster node \"%*s:%d\" is not "
                      "announced by IP address, which the module needs "
                      "(cluster-preferred-endpoint-type ip)",
                      name.size(), name.data(), number);
    }
}

// Connected, or connecting (commands wait in the connection), unless the
// node failed a moment ago.
bool RedisCluster::Node::ready() noexcept
{
    if (!conn.idle()) {
        return true;
    }

    if (cluster->closing_ || addr_len == 0 || ngx_current_msec < retry_at) {
        return false;
    }

    if (!conn.open({&addr.sockaddr, addr_len, display,
                    &cluster->target_.data, cluster->tls_,
                    cluster->target_.connect_timeout}))
    {
        on_close(&conn);
        return false;
    }

    // Queued first, answered before the call that opened the connection:
    // which form that call takes is decided already, the script until the
    // answer.  Cross-slot calls are the script's alone.
    if (!cluster->target_.cross_slot && !probe.ask(&conn, cluster->log_)) {
        conn.close();
        on_close(&conn);
        return false;
    }

    return true;
}

void RedisCluster::Node::on_open(RedisConnection *c) noexcept
{
    c->settle();
    failures = 0;
}

void RedisCluster::Node::on_close(RedisConnection *) noexcept
{
    retry_at = ngx_current_msec + reconnect_delay(failures++);
    cluster->refresh();
}

RedisCluster::RedisCluster(const RedisTarget &target, const RedisTls *tls,
                           LogThrottle *throttle, ngx_log_t *log) noexcept
    : target_(target), tls_(tls), throttle_(throttle), log_(log),
      asking_(this, throttle, log)
{
    init_event(&refresh_timer_, on_refresh, this, log);
}

RedisCluster::~RedisCluster()
{
    shutdown();
}

void RedisCluster::start() noexcept
{
    asked_ = 0;
    ask_next();
}

void RedisCluster::shutdown() noexcept
{
    closing_ = true;
    loaded_ = false;

    stop_timer(&refresh_timer_);

    asking_.close();

    for (auto &n : nodes_) {
        n->conn.close();
    }
}

RedisCluster::Node *RedisCluster::node(std::string_view host, int port) noexcept
{
    for (auto &n : nodes_) {
        if (n->port == port && n->host == host) {
            return n.get();
        }
    }

    try {
        nodes_.push_back(std::make_unique<Node>(this, host, port));
    } catch (...) {
        return nullptr;
    }

    return nodes_.back().get();
}

bool RedisCluster::send(std::uint16_t slot, std::string_view command,
                        RedisConnection::ReplyHandler handler,
                        void *data) noexcept
{
    if (closing_) {
        return false;
    }

    Node *n = master_of(slot);

    if (n == nullptr) {
        refresh();
        return false;
    }

    return n->ready() && n->conn.send(command, handler, data);
}

RedisCluster::Node *RedisCluster::master_of(std::uint16_t slot) const noexcept
{
    std::uint16_t index = map_.node_of(slot);

    return index == SlotMap::kNoNode || index >= node_of_.size()
               ? nullptr
               : node_of_[index];
}

bool RedisCluster::master_peer(ngx_uint_t n,
                               RedisConnection::Peer *peer) const noexcept
{
    if (node_of_.empty()) {
        return false;
    }

    const Node *node = node_of_[n % node_of_.size()];

    if (node == nullptr || node->addr_len == 0) {
        return false;
    }

    *peer = {&node->addr.sockaddr, node->addr_len, node->display,
             &target_.data, tls_, target_.connect_timeout};
    return true;
}

bool RedisCluster::decides(std::uint16_t slot) const noexcept
{
    Node *n = master_of(slot);
    return n != nullptr && n->probe.available();
}

void RedisCluster::decide_lost(std::uint16_t slot) noexcept
{
    if (Node *n = master_of(slot)) {
        n->probe.lost();
    }
}

bool RedisCluster::redirect(const Redirect &to, std::uint16_t from_slot,
                            std::string_view command,
                            RedisConnection::ReplyHandler handler,
                            void *data) noexcept
{
    std::string_view host = to.host;
    std::uint16_t from = map_.node_of(from_slot);

    // An empty host is the host of the node that answered.
    if (host.empty() && from != SlotMap::kNoNode) {
        host = map_.nodes()[from].host;
    }

    Node *n = node(host, to.port);

    if (n == nullptr || !n->ready()) {
        return false;
    }

    if (to.kind == Redirect::Kind::kMoved) {
        // A node new to the map gets the next index: node_of_ grows with
        // it, its room made first so that the two never disagree.
        if (map_.find(host, to.port) == SlotMap::kNoNode) {
            try {
                node_of_.reserve(node_of_.size() + 1);
            } catch (...) {
                return false;
            }

            if (!map_.move(to.slot, host, to.port)) {
                return false;
            }

            node_of_.push_back(n);

        } else if (!map_.move(to.slot, host, to.port)) {
            return false;
        }

        refresh();
        return n->conn.send(command, handler, data);
    }

    static const char kAsking[] = "*1\r\n$6\r\nASKING\r\n";
    return n->conn.send({kAsking, sizeof(kAsking) - 1},
                        [](void *, const redisReply *) noexcept {}, nullptr)
           && n->conn.send(command, handler, data);
}

void RedisCluster::refresh() noexcept
{
    if (closing_ || refresh_timer_.timer_set || !asking_.idle()) {
        return;
    }

    ngx_msec_t since = ngx_current_msec - last_refresh_;
    ngx_msec_t wait = failures_ > 0 ? reconnect_delay(failures_ - 1)
                      : since >= kRefreshMs ? 0 : kRefreshMs - since;

    ngx_add_timer(&refresh_timer_, wait);
}

void RedisCluster::on_refresh(ngx_event_t *ev) noexcept
{
    auto *cluster = static_cast<RedisCluster *>(ev->data);

    cluster->asked_ = 0;
    cluster->ask_next();
}

// The seeds in turn, then the masters the last map knew: the first that
// answers CLUSTER SLOTS gives the map.
void RedisCluster::ask_next() noexcept
{
    if (closing_) {
        return;
    }

    last_refresh_ = ngx_current_msec;
    ngx_uint_t seeds = target_.addresses.nelts;
    ngx_uint_t candidates = seeds + nodes_.size();

    while (asked_ < candidates) {
        ngx_uint_t i = next_seed_++ % candidates;
        asked_++;
        bool opened;

        if (i < seeds) {
            const RedisAddress &a =
                static_cast<const RedisAddress *>(target_.addresses.elts)[i];
            opened = asking_.open({a.addr.sockaddr, a.addr.socklen, a.text,
                                   &target_.data, tls_,
                                   target_.connect_timeout});
        } else {
            const Node &n = *nodes_[i - seeds];
            opened = n.addr_len > 0
                     && asking_.open({&n.addr.sockaddr, n.addr_len, n.display,
                                      &target_.data, tls_,
                                      target_.connect_timeout});
        }

        if (opened) {
            static const char kSlots[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";

            if (asking_.send({kSlots, sizeof(kSlots) - 1}, on_slots, this)) {
                return;
            }

            asking_.close();
        }
    }

    if (throttle_->allow()) {
        ngx_log_error(NGX_LOG_WARN, log_, 0,
                      "ratelimit: no redis cluster node gave the slot map");
    }

    failures_++;
    refresh();
}

void RedisCluster::on_open(RedisConnection *) noexcept
{
}

// The node asked for the map failed: the next one.
void RedisCluster::on_close(RedisConnection *) noexcept
{
    ask_next();
}

void RedisCluster::on_slots(void *data, const redisReply *reply) noexcept
{
    auto *cluster = static_cast<RedisCluster *>(data);

    if (reply != nullptr) {
        cluster->take_map(reply);
    }
}

void RedisCluster::take_map(const redisReply *reply) noexcept
{
    ngx_str_t from = asking_.display();
    SlotMap map;

    asking_.close();

    std::vector<Node *> node_of;
    bool ok = map.load(reply);

    try {
        for (std::size_t i = 0; ok && i < map.nodes().size(); i++) {
            Node *n = node(map.nodes()[i].host, map.nodes()[i].port);
            ok = n != nullptr;
            node_of.push_back(n);
        }
    } catch (...) {
        ok = false;
    }

    if (!ok) {
        if (throttle_->allow()) {
            ngx_log_error(NGX_LOG_WARN, log_, 0,
                          "ratelimit: redis at \"%V\" gave no slot map: %*s",
                          &from,
                          reply->type == REDIS_REPLY_ERROR
                              ? static_cast<size_t>(reply->len) : 0,
                          reply->type == REDIS_REPLY_ERROR ? reply->str : "");
        }

        ask_next();
        return;
    }

    map_ = std::move(map);
    node_of_ = std::move(node_of);
    loaded_ = true;
    failures_ = 0;

    ngx_log_error(NGX_LOG_INFO, log_, 0,
                  "ratelimit: redis cluster slot map from \"%V\": %uz masters",
                  &from, map_.nodes().size());
}

void RedisCluster::check_stall(ngx_msec_t stall_ms) noexcept
{
    for (auto &n : nodes_) {
        n->conn.check_stall(stall_ms);
    }
}

}  // namespace ratelimit
