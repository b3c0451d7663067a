#include "redis/decide_probe.hpp"

#include <string_view>

#include "protocol/batch_protocol.hpp"
#include "scripts/decide_command.hpp"
#include "redis/redis_connection.hpp"

namespace ratelimit {

bool is_unknown_command(std::string_view error) noexcept
{
    constexpr std::string_view kUnknownCommand = "ERR unknown command";

    return error.substr(0, kUnknownCommand.size()) == kUnknownCommand;
}

bool DecideProbe::ask(RedisConnection *conn, ngx_log_t *log) noexcept
{
    // No keys, no zones, no request: answered with Redis's time alone.
    // The number of zones carries a layout letter as every call's does:
    // a Redis module of the release before refuses it, and the connection
    // uses the script.
    static const char none[] = "0";
    static const char zones[] = {none[0], kLayoutHash};
    static const char *const argv[3] = {kDecideCommand, none, zones};
    static const size_t lens[3] = {sizeof(kDecideCommand) - 1, 1,
                                   sizeof(zones)};

    conn_ = conn;
    log_ = log;
    available_ = false;
    return conn->send_argv(3, const_cast<const char **>(argv), lens,
                           on_reply, this);
}

void DecideProbe::on_reply(void *data, const Reply *reply) noexcept
{
    auto *probe = static_cast<DecideProbe *>(data);

    // The connection closed before the answer: the next one asks again.
    if (reply == nullptr) {
        return;
    }

    probe->available_ = reply->type == Reply::Type::kArray
                        && reply->elements == 1
                        && reply->element[0].type == Reply::Type::kInteger;

    if (probe->available_) {
        ngx_log_error(NGX_LOG_NOTICE, probe->log_, 0,
                      "ratelimit: redis at \"%V\" has %s: this connection "
                      "uses it",
                      &probe->conn_->display(), kDecideCommand);
        return;
    }

    std::string_view error = reply->type == Reply::Type::kError
                             ? reply->text
                             : std::string_view();
    LoggedText why(error.empty() ? std::string_view("not its answer")
                                 : error);
    // A Redis without the module is the usual case, not a fault: told at
    // info.  Any other refusal (an ACL, an answer not the command's) may
    // be one.
    ngx_uint_t level = is_unknown_command(error) ? NGX_LOG_INFO
                                                 : NGX_LOG_NOTICE;

    ngx_log_error(level, probe->log_, 0,
                  "ratelimit: redis at \"%V\" cannot run %s (%V): this "
                  "connection uses the window script",
                  &probe->conn_->display(), kDecideCommand, why.str());
}

void DecideProbe::lost() noexcept
{
    if (!available_) {
        return;
    }

    available_ = false;
    ngx_log_error(NGX_LOG_NOTICE, log_, 0,
                  "ratelimit: redis at \"%V\" no longer knows %s: this "
                  "connection uses the window script",
                  &conn_->display(), kDecideCommand);
}

}  // namespace ratelimit
