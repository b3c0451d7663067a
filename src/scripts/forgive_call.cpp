#include "scripts/forgive_call.hpp"

#include "base/sha1.hpp"
#include "scripts/concurrency_script.hpp"
#include "scripts/resp_command.hpp"
#include "scripts/side_parts.hpp"

namespace ratelimit {

namespace {

constexpr std::string_view kWord = "forgive ";
constexpr std::string_view kUnsigned = "-";

// SIG of "MS KEY" (`stamped`) under `wake_key` into `out`.
void sign(std::string_view stamped, std::string_view wake_key,
          char out[kSha1HexLength])
{
    std::string text(kWord);
    text.append(stamped);
    wakeup_signature(wake_key, text, out);
}

// MS of "MS KEY" and the KEY after it; false if malformed.
bool read_stamp(std::string_view stamped, std::uint64_t *ms,
                std::string_view *key)
{
    size_t space = stamped.find(' ');

    if (space == 0 || space > 19 || space == std::string_view::npos
        || space + 1 == stamped.size())
    {
        return false;
    }

    *ms = 0;

    for (char c : stamped.substr(0, space)) {
        if (c < '0' || c > '9') {
            return false;
        }

        *ms = *ms * 10 + static_cast<std::uint64_t>(c - '0');
    }

    *key = stamped.substr(space + 1);
    return true;
}

bool fresh(std::uint64_t ms, std::uint64_t now_ms)
{
    return ms <= now_ms ? now_ms - ms <= kForgiveFreshMs
                        : ms - now_ms <= kForgiveFreshMs;
}

}  // namespace

std::string forgive_message(std::string_view key, std::string_view wake_key,
                            std::uint64_t now_ms)
{
    std::string stamped = std::to_string(now_ms);
    stamped += ' ';
    stamped.append(key);

    std::string message(kWord);

    if (wake_key.empty()) {
        message.append(kUnsigned);
    } else {
        char sig[kSha1HexLength];
        sign(stamped, wake_key, sig);
        message.append(sig, kSha1HexLength);
    }

    message += ' ';
    message.append(stamped);
    return message;
}

std::string_view forgiven_key(std::string_view message,
                              std::string_view wake_key,
                              std::uint64_t now_ms)
{
    if (message.substr(0, kWord.size()) != kWord) {
        return {};
    }

    message.remove_prefix(kWord.size());
    size_t space = message.find(' ');
    std::uint64_t ms;
    std::string_view key;

    if (space == std::string_view::npos
        || !read_stamp(message.substr(space + 1), &ms, &key))
    {
        return {};
    }

    std::string_view sig = message.substr(0, space);

    if (wake_key.empty()) {
        return key;
    }

    if (sig.size() != kSha1HexLength || !fresh(ms, now_ms)) {
        return {};
    }

    char expected[kSha1HexLength];
    sign(message.substr(space + 1), wake_key, expected);

    // In constant time: a mismatch's time tells nothing of the right SIG.
    unsigned char differ = 0;

    for (size_t i = 0; i < kSha1HexLength; i++) {
        differ |= static_cast<unsigned char>(expected[i] ^ sig[i]);
    }

    return differ == 0 ? key : std::string_view();
}

std::string format_forgive_call(std::string_view key,
                                std::string_view channel,
                                std::string_view message,
                                std::string_view side_key,
                                std::string_view marker)
{
    // A side key of another type is left alone, as the window script
    // leaves it.
    static constexpr std::string_view kScript = R"lua(
redis.call('DEL', KEYS[1])
local v = KEYS[2] and redis.pcall('GET', KEYS[2])
if type(v) == 'string' then
  put_parts(KEYS[2], KEYS[3], parts_without(v, 'b='))
end
return redis.call('PUBLISH', ARGV[1], ARGV[2])
)lua";
    std::string script(kSidePartsLua);
    script.append(kScript);

    if (side_key.empty()) {
        std::string_view argv[] = {"EVAL", script, "1", key, channel,
                                   message};
        return format_command(argv);
    }

    std::string_view argv[] = {"EVAL", script, "3", key, side_key, marker,
                               channel, message};
    return format_command(argv);
}

}  // namespace ratelimit
