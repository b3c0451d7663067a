#include "params/redis_params.hpp"

#include <iterator>

namespace ratelimit {

namespace {

// ratelimit_redis has one form.
constexpr unsigned kRedisForm = 1;

enum RedisParam {
    kDb,
    kUser,
    kPassword,
    kPasswordFile,
    kSentinel,
    kSentinelUser,
    kSentinelPassword,
    kTimeout,
    kConnectTimeout,
    kFleetSecretFile,
    kLayout,
    kRedisParamCount
};

bool valid_db(std::string_view value)
{
    return parse_nginx_int(value).has_value();
}

bool valid_string(std::string_view value)
{
    return !value.empty();
}

bool valid_time(std::string_view value)
{
    return parse_time_ms(value).has_value();
}

bool valid_layout(std::string_view value)
{
    return value == "packed" || value == "hash";
}

// Checked as they are read: each error names the parameter as written.
constexpr NamedParam kRedisParams[] = {
    {"db", kRedisForm, valid_db},
    {"user", kRedisForm, valid_string},
    {"password", kRedisForm, valid_string},
    {"password_file", kRedisForm, valid_string},
    {"sentinel", kRedisForm, valid_string},
    {"sentinel_user", kRedisForm, valid_string},
    {"sentinel_password", kRedisForm, valid_string},
    {"timeout", kRedisForm, valid_time},
    {"connect_timeout", kRedisForm, valid_time},
    {"fleet_secret_file", kRedisForm, valid_string},
    {"layout", kRedisForm, valid_layout},
};

static_assert(std::size(kRedisParams) == kRedisParamCount);

using RedisValues = std::optional<std::string_view>[kRedisParamCount];

// The words an address may be taken for: "cluster" must come first, and
// "sentinel" takes the master's name.  Written elsewhere, each is read as
// an address: the error then says what was meant.
constexpr char kMisplacedCluster[] =
    "\"cluster\" must come first: ratelimit_redis cluster ADDRESS ...";
constexpr char kBareSentinel[] =
    "\"sentinel\" needs the master's name: sentinel=NAME";

// The error for a "cluster" after the first token, or a "sentinel", of
// `tokens` (both read as addresses); nullptr if there is none.
const char *misplaced_word(const ParamTokens &tokens)
{
    for (std::size_t i = 0; i < tokens.size(); i++) {
        if (i > 0 && tokens[i] == "cluster") {
            return kMisplacedCluster;
        }

        if (tokens[i] == "sentinel") {
            return kBareSentinel;
        }
    }

    return nullptr;
}

// One token: `cluster` (the first only), `cross_slot`, an address (no
// '='), or NAME=VALUE.
std::optional<std::string> take_redis_token(const ParamTokens &tokens,
                                            std::size_t i, RedisParams *out,
                                            RedisValues &values)
{
    std::string_view token = tokens[i];

    if (i == 0 && token == "cluster") {
        out->cluster = true;
        return std::nullopt;
    }

    if (token == "cross_slot") {
        if (!out->cluster) {
            return misplaced_word(tokens) == kMisplacedCluster
                   ? kMisplacedCluster
                   : "\"cross_slot\" requires \"cluster\"";
        }
        if (out->cross_slot) {
            return duplicate_param_text(token);
        }
        out->cross_slot = true;
        return std::nullopt;
    }

    if (token.find('=') == std::string_view::npos) {
        out->addresses.push_back(RedisAddressParam{token, i});
        return std::nullopt;
    }

    return take_named_param(kRedisParams, kRedisParamCount, kRedisForm,
                            token, values);
}

// The combinations of parameters that cannot work.
const char *check_redis_params(const ParamTokens &tokens,
                               const RedisParams &p, bool db_given)
{
    bool sentinel = !p.sentinel_master.empty();

    if (p.addresses.empty()) {
        return p.cluster ? "ratelimit_redis cluster needs the address of a "
                           "seed node"
                         : "ratelimit_redis needs an address";
    }

    if (p.cluster && (sentinel || db_given)) {
        return "\"cluster\" cannot be combined with \"sentinel=\" or "
               "\"db=\": a cluster has one database and no sentinels";
    }

    if (!sentinel && !p.cluster && p.addresses.size() > 1) {
        const char *misplaced = misplaced_word(tokens);

        return misplaced != nullptr
               ? misplaced
               : "ratelimit_redis takes one address, the addresses of "
                 "sentinels with \"sentinel=\", or seed nodes after "
                 "\"cluster\"";
    }

    if (!sentinel
        && (!p.sentinel_user.empty() || !p.sentinel_password.empty()))
    {
        return "\"sentinel_user=\" and \"sentinel_password=\" require "
               "\"sentinel=\"";
    }

    if (!p.sentinel_user.empty() && p.sentinel_password.empty()) {
        return "\"sentinel_user=\" requires \"sentinel_password=\"";
    }

    if (!p.password.empty() && !p.password_file.empty()) {
        return "\"password=\" and \"password_file=\" cannot be combined";
    }

    if (!p.user.empty() && p.password.empty() && p.password_file.empty()) {
        return "\"user=\" requires \"password=\" or \"password_file=\"";
    }

    return nullptr;
}

// The values read, checked already, into *out.
void store_redis_values(const RedisValues &v, RedisParams *out)
{
    out->user = v[kUser].value_or("");
    out->password = v[kPassword].value_or("");
    out->password_file = v[kPasswordFile].value_or("");
    out->sentinel_master = v[kSentinel].value_or("");
    out->sentinel_user = v[kSentinelUser].value_or("");
    out->sentinel_password = v[kSentinelPassword].value_or("");
    out->fleet_secret_file = v[kFleetSecretFile].value_or("");

    if (v[kDb]) {
        out->db = parse_nginx_int(*v[kDb]).value_or(0);
    }

    if (v[kLayout]) {
        out->packed = *v[kLayout] == "packed";
    }

    if (v[kTimeout]) {
        out->timeout_ms = parse_time_ms(*v[kTimeout]).value_or(0);
    }

    if (v[kConnectTimeout]) {
        out->connect_timeout_ms =
            parse_time_ms(*v[kConnectTimeout]).value_or(0);
    }
}

}  // namespace

PasswordLine password_file_line(std::string_view head)
{
    std::string_view line = head.substr(0, head.find_first_of("\r\n"));

    if (line.size() > kMaxPasswordSize) {
        return PasswordLine{{}, true};
    }

    return PasswordLine{line, false};
}

ParamResult<RedisParams> parse_redis_params(const ParamTokens &tokens)
{
    ParamResult<RedisParams> result;
    RedisValues values;

    for (std::size_t i = 0; i < tokens.size(); i++) {
        auto error = take_redis_token(tokens, i, &result.params, values);

        if (error) {
            result.error = ParamError{std::move(*error), i};
            return result;
        }
    }

    store_redis_values(values, &result.params);

    const char *error = check_redis_params(tokens, result.params,
                                           values[kDb].has_value());

    if (error != nullptr) {
        result.error = ParamError{error, tokens.size()};
    }

    return result;
}

}  // namespace ratelimit
