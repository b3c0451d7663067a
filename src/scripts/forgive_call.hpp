// Forgiving a subject (`ratelimit_query ... delete=on`, DELETE): the call
// that deletes its key in Redis and tells every worker of the fleet, on
// the forgive channel, to drop the rejection it remembers of that key
// (limits/deny_cache.hpp); and that message read back.
//
// The message is "forgive SIG MS KEY": MS the signer's wall clock in ms
// since the epoch, SIG the 40 hex digits of wakeup_signature() of
// "forgive MS KEY" under the fleet's wake key (as the concurrency zones'
// wake-ups are signed), or "-" when the fleet has no secret.  KEY is the
// subject's key, bytes as they are.  A server with a wake key takes only
// messages it signed, and only within kForgiveFreshMs of MS by its own
// clock: anyone who may PUBLISH could otherwise empty every worker's
// memory of rejections at will, sending each rejected request to Redis
// again, with a message once captured.  A replay within that time forgives
// a key that was just forgiven anyway.  A server without a wake key takes
// any: whoever may PUBLISH may also DEL.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ratelimit {

// The channel, after the key prefix: "PREFIX:wake:forgive".  Worker
// channels are "PREFIX:wake:" and 16 hex digits, so none is this one.
constexpr std::string_view kForgiveChannelSuffix = ":wake:forgive";

// How far a signed message's MS may be from the taker's clock, either
// way: the servers' clocks must agree within it.
constexpr std::uint64_t kForgiveFreshMs = 60000;

// The message forgiving `key` at `now_ms`, signed with `wake_key` if not
// empty.  Throws std::bad_alloc.
std::string forgive_message(std::string_view key, std::string_view wake_key,
                            std::uint64_t now_ms);

// The key a message forgives, if it is one a server with `wake_key` takes
// at `now_ms`; empty if not (malformed, or unsigned, wrongly signed or not
// fresh where a wake key is set).  A view into `message`.
std::string_view forgiven_key(std::string_view message,
                              std::string_view wake_key,
                              std::uint64_t now_ms);

// EVAL of a script that deletes `key` and publishes `message` on `channel`
// at once: one reply, the number of subscribers that got the message.
// With `side_key` (the subject's side key of a zone that bans, issue 43)
// and `marker` (its zone's marker of the slot) it also lifts the subject's
// ban: the side key's ban parts ("b=...") are dropped and the others kept
// (SET ... KEEPTTL: an override stays as it was), or the key deleted and
// taken out of the marker where no part is left.  In a cluster the call
// goes to the node of `key` (the side key and marker share its slot);
// Redis forwards the message to every node's subscribers.  Throws
// std::bad_alloc.
std::string format_forgive_call(std::string_view key,
                                std::string_view channel,
                                std::string_view message,
                                std::string_view side_key = {},
                                std::string_view marker = {});

}  // namespace ratelimit
