#include "redis/redis_cluster.hpp"

#include <algorithm>
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
        LoggedText shown(name, Quoted::kYes);
        ngx_log_error(NGX_LOG_WARN, owner->log_, 0,
                      "ratelimit: redis cluster node \"%V:%d\" is not "
                      "announced by IP address, which the module needs "
                      "(cluster-preferred-endpoint-type ip)",
                      shown.str(), number);
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

    if (!conn.open(peer())) {
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

// The node as announced: its address, and its host for TLS.
RedisConnection::Peer RedisCluster::Node::peer() const noexcept
{
    ngx_str_t name = {host.size(), reinterpret_cast<u_char *>(
                                       const_cast<char *>(host.c_str()))};

    return {&addr.sockaddr, addr_len, display, name, &cluster->target_.data,
            cluster->tls_, cluster->target_.connect_timeout};
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
    init_event(&reap_, on_reap, this, log);
    ngx_queue_init(&try_again_calls_);
}

RedisCluster::~RedisCluster()
{
    shutdown();
}

void RedisCluster::ask_first_map() noexcept
{
    asked_ = 0;
    ask_next();
}

void RedisCluster::shutdown() noexcept
{
    closing_ = true;
    loaded_ = false;

    stop_timer(&refresh_timer_);

    // Retired nodes are closed already; the destructor frees them.
    if (reap_.posted) {
        ngx_delete_posted_event(&reap_);
    }

    asking_.close();

    for (auto &n : nodes_) {
        n->conn.close();
    }

    // Calls waiting out a TRYAGAIN are answered as the connections' are.
    while (!ngx_queue_empty(&try_again_calls_)) {
        ngx_queue_t *q = ngx_queue_head(&try_again_calls_);
        auto *call = ngx_queue_data(q, KeyedCall, queue);

        ngx_queue_remove(q);
        stop_timer(&call->try_again);
        finish(call, nullptr);
    }
}

// The node at host:port of those kept (the map's, the extra ones), or
// nullptr.
RedisCluster::Node *RedisCluster::known(std::string_view host,
                                        int port) const noexcept
{
    std::uint16_t i = map_.find(host, port);

    if (i != SlotMap::kNoNode) {
        return i < node_of_.size() ? node_of_[i] : nullptr;
    }

    for (Node *n : extras_) {
        if (n->port == port && n->host == host) {
            return n;
        }
    }

    return nullptr;
}

// The node a redirect names: one kept, else an extra one made while this
// map's allowance lasts, the least recently named extra one retired to
// make room.  nullptr if none may be made, or no memory.
RedisCluster::Node *RedisCluster::node(std::string_view host, int port) noexcept
{
    if (Node *n = known(host, port)) {
        n->used = ++uses_;
        return n;
    }

    if (extras_made_ == kMaxExtraNodes) {
        return nullptr;
    }

    std::unique_ptr<Node> made;

    try {
        extras_.reserve(kMaxExtraNodes);
        nodes_.reserve(nodes_.size() + 1);
        retired_.reserve(retired_.size() + 1);
        made = std::make_unique<Node>(this, host, port);
    } catch (...) {
        return nullptr;
    }

    Node *n = made.get();
    Node *evicted = nullptr;

    if (extras_.size() == kMaxExtraNodes) {
        auto lru = std::min_element(extras_.begin(), extras_.end(),
                                    [](const Node *a, const Node *b) {
                                        return a->used < b->used;
                                    });
        evicted = *lru;
        extras_.erase(lru);
    }

    n->extra = true;
    n->used = ++uses_;
    extras_.push_back(n);
    nodes_.push_back(std::move(made));
    extras_made_++;

    if (evicted != nullptr) {
        retire(evicted);
    }

    return n;
}

// Forgets a node of nodes_ (no longer in extras_ nor node_of_), its room
// in retired_ made: its connection is closed (calls in flight on it get
// their nullptr), and the node is freed by a posted event, as this may
// run inside a callback of that very connection.
void RedisCluster::retire(Node *n) noexcept
{
    auto at = std::find_if(nodes_.begin(), nodes_.end(),
                           [n](const std::unique_ptr<Node> &p) {
                               return p.get() == n;
                           });

    if (at == nodes_.end()) {
        return;
    }

    std::swap(*at, nodes_.back());
    retired_.push_back(std::move(nodes_.back()));
    nodes_.pop_back();

    if (!closing_ && !reap_.posted) {
        ngx_post_event(&reap_, &ngx_posted_events);
    }

    n->conn.close();
}

void RedisCluster::on_reap(ngx_event_t *ev) noexcept
{
    static_cast<RedisCluster *>(ev->data)->retired_.clear();
}

bool RedisCluster::send_keyed(std::uint16_t slot, std::string_view command,
                              RedisConnection::ReplyHandler handler,
                              StillWanted wanted, void *data) noexcept
{
    if (closing_) {
        return false;
    }

    Node *n = master_of(slot);

    if (n == nullptr) {
        refresh();
        return false;
    }

    if (!n->ready()) {
        return false;
    }

    auto *call = new (std::nothrow) KeyedCall();

    if (call == nullptr) {
        return false;
    }

    try {
        call->command.assign(command);
    } catch (...) {
        delete call;
        return false;
    }

    call->cluster = this;
    call->slot = slot;
    call->handler = handler;
    call->wanted = wanted;
    call->data = data;
    init_event(&call->try_again, on_try_again, call, log_);
    ngx_queue_init(&call->queue);

    if (!n->conn.send(command, on_keyed_reply, call)) {
        delete call;
        return false;
    }

    return true;
}

void RedisCluster::on_keyed_reply(void *data, const Reply *reply) noexcept
{
    auto *call = static_cast<KeyedCall *>(data);

    if (!call->cluster->follow(call, reply)) {
        call->cluster->finish(call, reply);
    }
}

// What the cluster says of a call that did not run.  True if the call
// goes on (sent again, now or after TRYAGAIN's wait), or was answered
// with nullptr because nobody wants it any more.
bool RedisCluster::follow(KeyedCall *call, const Reply *reply) noexcept
{
    if (reply == nullptr || reply->type != Reply::Type::kError) {
        return false;
    }

    std::string_view error = reply->text;

    if (error.substr(0, 11) == "CLUSTERDOWN") {
        refresh();
        return false;
    }

    bool try_again = error.substr(0, 8) == "TRYAGAIN";
    Redirect to = parse_redirect(error);

    if ((!try_again && to.kind == Redirect::Kind::kNone)
        || call->redirects == kMaxRedirects)
    {
        return false;
    }

    if (call->wanted != nullptr && !call->wanted(call->data)) {
        finish(call, nullptr);
        return true;
    }

    call->redirects++;

    if (try_again) {
        ngx_queue_insert_tail(&try_again_calls_, &call->queue);
        ngx_add_timer(&call->try_again, kTryAgainMs);
        return true;
    }

    return follow_redirect(call, to);
}

// MOVED: the map learns it at once; ASK: once, after ASKING.  An empty
// host is the host of the node that answered, the slot's master.
bool RedisCluster::follow_redirect(KeyedCall *call, const Redirect &to) noexcept
{
    std::string_view host = to.host;
    std::uint16_t from = map_.node_of(call->slot);

    if (host.empty() && from != SlotMap::kNoNode) {
        host = map_.nodes()[from].host;
    }

    // The map is asked for again, whichever node is named: of one it
    // does not have, the MOVED is not taken on trust.
    if (to.kind == Redirect::Kind::kMoved) {
        refresh();
    }

    Node *n = node(host, to.port);

    if (n == nullptr || !n->ready()) {
        return false;
    }

    if (to.kind == Redirect::Kind::kMoved) {
        map_.move(to.slot, host, to.port);
        return n->conn.send(call->command, on_keyed_reply, call);
    }

    static const char kAsking[] = "*1\r\n$6\r\nASKING\r\n";
    return n->conn.send({kAsking, sizeof(kAsking) - 1},
                        [](void *, const Reply *) noexcept {}, nullptr)
           && n->conn.send(call->command, on_keyed_reply, call);
}

void RedisCluster::on_try_again(ngx_event_t *ev) noexcept
{
    auto *call = static_cast<KeyedCall *>(ev->data);
    RedisCluster *cluster = call->cluster;
    Node *n = cluster->master_of(call->slot);

    ngx_queue_remove(&call->queue);
    ngx_queue_init(&call->queue);

    if ((call->wanted != nullptr && !call->wanted(call->data))
        || n == nullptr || !n->ready()
        || !n->conn.send(call->command, on_keyed_reply, call))
    {
        cluster->finish(call, nullptr);
    }
}

void RedisCluster::finish(KeyedCall *call, const Reply *reply) noexcept
{
    call->handler(call->data, reply);
    delete call;
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

    *peer = node->peer();
    return true;
}

bool RedisCluster::has_module_command(std::uint16_t slot) const noexcept
{
    Node *n = master_of(slot);
    return n != nullptr && n->probe.available();
}

void RedisCluster::module_command_lost(std::uint16_t slot) noexcept
{
    if (Node *n = master_of(slot)) {
        n->probe.lost();
    }
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
    ngx_uint_t candidates = seeds + node_of_.size();

    while (asked_ < candidates) {
        ngx_uint_t i = next_seed_++ % candidates;
        asked_++;
        bool opened;

        if (i < seeds) {
            const RedisAddress &a =
                static_cast<const RedisAddress *>(target_.addresses.elts)[i];
            opened = asking_.open({a.addr.sockaddr, a.addr.socklen, a.text,
                                   a.host, &target_.data, tls_,
                                   target_.connect_timeout});
        } else {
            const Node &n = *node_of_[i - seeds];
            opened = n.addr_len > 0 && asking_.open(n.peer());
        }

        if (opened) {
            static const char kSlots[] =
                "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";

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

void RedisCluster::on_slots(void *data, const Reply *reply) noexcept
{
    auto *cluster = static_cast<RedisCluster *>(data);

    if (reply != nullptr) {
        cluster->take_map(reply);
    }
}

// A map within SlotMap's bounds replaces the last one.  Its nodes are
// those kept that it names (an extra one becomes the map's), else made;
// the last map's nodes it does not name are forgotten, extra ones stay.
// Rejected, the last map stays, and the next node is asked.
void RedisCluster::take_map(const Reply *reply) noexcept
{
    ngx_str_t from = asking_.display();
    SlotMap map;
    std::string why;

    asking_.close();

    std::vector<Node *> node_of;
    std::vector<std::unique_ptr<Node>> made;
    std::vector<std::unique_ptr<Node>> kept;
    bool ok = map.load(reply, &why);

    try {
        for (std::size_t i = 0; ok && i < map.nodes().size(); i++) {
            const SlotMap::Node &m = map.nodes()[i];
            Node *n = known(m.host, m.port);

            if (n == nullptr) {
                made.push_back(std::make_unique<Node>(this, m.host, m.port));
                n = made.back().get();
            }

            node_of.push_back(n);
        }

        if (ok) {
            kept.reserve(nodes_.size() + made.size());
            retired_.reserve(retired_.size() + nodes_.size());
        }

    } catch (...) {
        ok = false;
        why.clear();
    }

    if (!ok) {
        if (throttle_->allow()) {
            LoggedText shown(why.empty() ? "no memory" : why);
            ngx_log_error(NGX_LOG_WARN, log_, 0,
                          "ratelimit: redis at \"%V\" gave no slot map: %V",
                          &from, shown.str());
        }

        ask_next();
        return;
    }

    for (auto &n : nodes_) {
        n->named = false;
    }

    for (Node *n : node_of) {
        n->named = true;
    }

    std::size_t forgotten = retired_.size();

    for (auto &n : nodes_) {
        if (n->named) {
            n->extra = false;
            kept.push_back(std::move(n));
        } else if (n->extra) {
            kept.push_back(std::move(n));
        } else {
            retired_.push_back(std::move(n));
        }
    }

    for (auto &n : made) {
        kept.push_back(std::move(n));
    }

    extras_.erase(std::remove_if(extras_.begin(), extras_.end(),
                                 [](const Node *n) { return !n->extra; }),
                  extras_.end());
    nodes_ = std::move(kept);
    map_ = std::move(map);
    node_of_ = std::move(node_of);
    extras_made_ = 0;
    loaded_ = true;
    failures_ = 0;

    ngx_log_error(NGX_LOG_INFO, log_, 0,
                  "ratelimit: redis cluster slot map from \"%V\": %uz masters",
                  &from, map_.nodes().size());

    // Closed once the new map is in place: a call in flight on a node
    // forgotten gets its nullptr, and what its handler sends next goes by
    // the new map.  Freed later: a handler may be on the stack.
    if (retired_.size() > forgotten) {
        if (!reap_.posted) {
            ngx_post_event(&reap_, &ngx_posted_events);
        }

        for (std::size_t i = forgotten; i < retired_.size(); i++) {
            retired_[i]->conn.close();
        }
    }
}

void RedisCluster::check_stall(ngx_msec_t stall_ms) noexcept
{
    for (auto &n : nodes_) {
        n->conn.check_stall(stall_ms);
    }
}

}  // namespace ratelimit
