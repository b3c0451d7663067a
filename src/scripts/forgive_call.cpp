#include "scripts/forgive_call.hpp"

#include "base/sha1.hpp"
#include "scripts/concurrency_script.hpp"
#include "scripts/resp_command.hpp"

namespace ratelimit {

namespace {

constexpr std::string_view kWord = "forgive ";
constexpr std::string_view kUnsigned = "-";

// SIG of `key` under `wake_key` into `out`.
void sign(std::string_view key, std::string_view wake_key,
          char out[kSha1HexLength])
{
    std::string text(kWord);
    text.append(key);
    wakeup_signature(wake_key, text, out);
}

}  // namespace

std::string forgive_message(std::string_view key, std::string_view wake_key)
{
    std::string message(kWord);

    if (wake_key.empty()) {
        message.append(kUnsigned);
    } else {
        char sig[kSha1HexLength];
        sign(key, wake_key, sig);
        message.append(sig, kSha1HexLength);
    }

    message += ' ';
    message.append(key);
    return message;
}

std::string_view forgiven_key(std::string_view message,
                              std::string_view wake_key)
{
    if (message.substr(0, kWord.size()) != kWord) {
        return {};
    }

    message.remove_prefix(kWord.size());
    size_t space = message.find(' ');

    if (space == std::string_view::npos || space + 1 == message.size()) {
        return {};
    }

    std::string_view sig = message.substr(0, space);
    std::string_view key = message.substr(space + 1);

    if (wake_key.empty()) {
        return key;
    }

    if (sig.size() != kSha1HexLength) {
        return {};
    }

    char expected[kSha1HexLength];
    sign(key, wake_key, expected);

    // In constant time: a mismatch's time tells nothing of the right SIG.
    unsigned char differ = 0;

    for (size_t i = 0; i < kSha1HexLength; i++) {
        differ |= static_cast<unsigned char>(expected[i] ^ sig[i]);
    }

    return differ == 0 ? key : std::string_view();
}

std::string format_forgive_call(std::string_view key,
                                std::string_view channel,
                                std::string_view message)
{
    static constexpr std::string_view kScript =
        "redis.call('DEL', KEYS[1]) "
        "return redis.call('PUBLISH', ARGV[1], ARGV[2])";
    std::string_view argv[] = {"EVAL", kScript, "1", key, channel, message};
    return format_command(argv);
}

}  // namespace ratelimit
