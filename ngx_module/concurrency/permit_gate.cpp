#include "concurrency/permit_gate.hpp"

#include <new>

#include "metrics/metrics.hpp"
#include "base/sha1.hpp"

namespace ratelimit {

namespace {

PermitWaiter *waiter_of(ngx_rbtree_node_t *node)
{
    return reinterpret_cast<PermitWaiter *>(
        reinterpret_cast<char *>(node) - offsetof(PermitWaiter, node));
}

// A decimal number of up to 19 digits, as the script writes SEQ and
// FREED_US.
std::uint64_t parse_number(std::string_view text, bool *ok)
{
    std::uint64_t n = 0;

    *ok = !text.empty() && text.size() <= 19;

    for (char c : text) {
        *ok = *ok && c >= '0' && c <= '9';
        n = n * 10 + static_cast<std::uint64_t>(c - '0');
    }

    return n;
}

}  // namespace

std::uint64_t wall_clock_us() noexcept
{
    struct timespec now;

    if (clock_gettime(CLOCK_REALTIME, &now) != 0) {
        return 0;
    }

    return static_cast<std::uint64_t>(now.tv_sec) * 1000000
           + static_cast<std::uint64_t>(now.tv_nsec) / 1000;
}

PermitGate::PermitGate(RedisLink *link, const ngx_str_t &prefix,
                       const ngx_str_t &wake_key, ngx_log_t *log) noexcept
    : link_(link), log_(log)
{
    ngx_rbtree_init(&waiters_, &sentinel_, ngx_rbtree_insert_value);

    try {
        wake_key_.assign(view(wake_key));
        wake_prefix_.assign(view(prefix));
        wake_prefix_ += ":wake:";
    } catch (...) {
        wake_prefix_.clear();
    }
}

PermitGate::~PermitGate()
{
    delete subscriber_;
}

// The worker's name must differ from every other worker's of the fleet,
// now and across restarts: a digest of the host, the pid, the time and
// nginx's random numbers.
bool PermitGate::subscribe() noexcept
{
    u_char seed[NGX_MAXHOSTNAMELEN + 3 * NGX_INT64_LEN + 4];
    u_char *end = ngx_snprintf(seed, sizeof(seed), "%V %P %M %l",
                               &ngx_cycle->hostname, ngx_pid,
                               ngx_current_msec, ngx_random());
    char digest[kSha1HexLength];

    sha1_hex({reinterpret_cast<char *>(seed),
              static_cast<size_t>(end - seed)}, digest);

    if (wake_prefix_.empty()) {
        return false;
    }

    try {
        channel_ = wake_prefix_;
        channel_.append(digest, kWorkerIdLength);
    } catch (...) {
        return false;
    }

    subscriber_ = new (std::nothrow) RedisSubscriber(
        link_, channel_, on_message, on_subscription, this, log_);
    return subscriber_ != nullptr;
}

PermitCallRecord *PermitGate::send(PermitOp op, PermitAnswer answered,
                                   void *waiter, std::string_view key,
                                   std::uint64_t seq,
                                   const ConcurrencyPolicy *policy,
                                   bool dry_run) noexcept
{
    if (!link_->up()) {
        return nullptr;
    }

    auto *call = new (std::nothrow) PermitCallRecord();

    if (call == nullptr) {
        return nullptr;
    }

    *call = {this, answered, waiter, op, false, policy, dry_run, {}, seq,
             op == PermitOp::kRelease ? wall_clock_us() : 0};

    try {
        call->key.assign(key);
    } catch (...) {
        delete call;
        return nullptr;
    }

    if (put(call, false) != nullptr) {
        delete call;
        return nullptr;
    }

    return call;
}

// The call's command and the key that routes it; false on no memory.
bool PermitGate::format(const PermitCallRecord *call, bool eval,
                        std::string *command, std::string *held) const noexcept
{
    try {
        std::string token(channel_, wake_prefix_.size());
        token += '.';
        token += std::to_string(call->seq);

        *command = format_permit_call({call->op, call->key, token,
                                     call->policy, wake_prefix_,
                                     call->dry_run, call->freed_us,
                                     wake_key_}, eval);
        *held = held_key(call->key);
    } catch (...) {
        return false;
    }

    return !command->empty();
}

// nullptr when sent, else why not.
const char *PermitGate::put(PermitCallRecord *call, bool eval) noexcept
{
    std::string command, held;

    if (!format(call, eval, &command, &held)) {
        return "no memory for the call to redis";
    }

    // In a cluster, the cluster follows its redirects.
    if (!link_->send_for_key(held, command, on_answer, call)) {
        return "redis is not connected";
    }

    return nullptr;
}

void PermitGate::on_answer(void *data, const Reply *reply) noexcept
{
    auto *call = static_cast<PermitCallRecord *>(data);
    call->gate->answer(call, reply);
}

void PermitGate::answer(PermitCallRecord *call, const Reply *reply) noexcept
{
    PermitReply decoded = decode_permit_reply(reply);

    // NOSCRIPT: it did not run.  The script is loaded by its first EVAL
    // on each connection, so this costs a round trip per connection.
    if (decoded.kind == PermitReply::Kind::kNoScript && !call->retried) {
        call->retried = true;
        metrics::record_link_error(LinkError::kNoScript);

        if (put(call, true) == nullptr) {
            return;
        }
    }

    if (call->waiter != nullptr) {
        call->answered(call->waiter, reply == nullptr ? nullptr : &decoded);
    } else if (decoded.kind == PermitReply::Kind::kError && link_->may_log()) {
        LoggedText error(decoded.error);
        ngx_log_error(NGX_LOG_WARN, log_, 0,
                      "ratelimit: redis answered an error: %V", error.str());
    }

    delete call;
}

void PermitGate::add_waiter(PermitWaiter *waiter, std::uint64_t seq) noexcept
{
    waiter->node.key = static_cast<ngx_rbtree_key_t>(seq);
    ngx_rbtree_insert(&waiters_, &waiter->node);
    waiter->waiting = true;
}

void PermitGate::remove_waiter(PermitWaiter *waiter) noexcept
{
    if (waiter->waiting) {
        ngx_rbtree_delete(&waiters_, &waiter->node);
        waiter->waiting = false;
    }
}

// "WORKER.SEQ FREED_US" or, signed, "WORKER.SEQ FREED_US SIG".
void PermitGate::on_message(void *data, std::string_view message) noexcept
{
    auto *gate = static_cast<PermitGate *>(data);
    std::string_view name(gate->channel_);
    name.remove_prefix(gate->wake_prefix_.size());

    if (message.size() <= name.size() + 1
        || message.substr(0, name.size()) != name
        || message[name.size()] != '.')
    {
        return;
    }

    std::string_view token = message.substr(name.size() + 1);
    std::string_view freed, signature;
    size_t space = token.find(' ');

    if (space != std::string_view::npos) {
        freed = token.substr(space + 1);
        token = token.substr(0, space);
        space = freed.find(' ');

        if (space != std::string_view::npos) {
            signature = freed.substr(space + 1);
            freed = freed.substr(0, space);
        }
    }

    bool ok, freed_ok;
    std::uint64_t seq = parse_number(token, &ok);
    std::uint64_t freed_us = parse_number(freed, &freed_ok);
    PermitWaiter *waiter = ok ? gate->find_waiter(seq) : nullptr;

    if (waiter != nullptr) {
        bool is_signed = freed_ok && gate->signed_by_fleet(
            message.substr(0, message.size() - signature.size() - 1),
            signature);
        waiter->woken(waiter, freed_ok ? freed_us : 0, is_signed);
    }
}

PermitWaiter *PermitGate::find_waiter(std::uint64_t seq) noexcept
{
    ngx_rbtree_node_t *node = waiters_.root;
    auto key = static_cast<ngx_rbtree_key_t>(seq);

    while (node != &sentinel_) {
        if (key == node->key) {
            return waiter_of(node);
        }

        node = key < node->key ? node->left : node->right;
    }

    return nullptr;
}

// `signature` is SIG of `signed_part` under the fleet's wake key.  Compared
// in constant time: the time of a mismatch tells nothing of the right SIG.
bool PermitGate::signed_by_fleet(std::string_view signed_part,
                                 std::string_view signature) const noexcept
{
    if (wake_key_.empty() || signature.size() != kSha1HexLength) {
        return false;
    }

    char expected[kSha1HexLength];

    try {
        wakeup_signature(wake_key_, signed_part, expected);
    } catch (...) {
        return false;
    }

    unsigned char differ = 0;

    for (size_t i = 0; i < kSha1HexLength; i++) {
        differ |= static_cast<unsigned char>(expected[i] ^ signature[i]);
    }

    return differ == 0;
}

// Messages may have been lost meanwhile: every waiter asks Redis.  A
// recheck may take its own waiter out of the tree, never another, so the
// next one is found before it.
void PermitGate::on_subscription(void *data) noexcept
{
    auto *gate = static_cast<PermitGate *>(data);
    ngx_rbtree_t *tree = &gate->waiters_;

    if (tree->root == &gate->sentinel_) {
        return;
    }

    ngx_rbtree_node_t *node = ngx_rbtree_min(tree->root, &gate->sentinel_);

    while (node != nullptr) {
        ngx_rbtree_node_t *next = ngx_rbtree_next(tree, node);
        PermitWaiter *waiter = waiter_of(node);
        waiter->recheck(waiter);
        node = next;
    }
}

}  // namespace ratelimit
