// Whether the Redis at the other end of a connection has the Redis module's
// command (decide_command.hpp), asked each time the connection comes up by
// calling it with no request, which also shows that the ACL user may run
// it.  The answer says how that connection's batches are sent: the command
// where it answers, else the window script; until it comes, the script.
// One probe per connection: in a cluster each node answers for itself.
#pragma once

#include <string_view>

#include "conf/module_conf.hpp"

namespace ratelimit {

// Whether `error` is how Redis (and Valkey) answer a command they do not
// have: it ran nothing.
bool is_unknown_command(std::string_view error) noexcept;

class RedisConnection;

class DecideProbe {
public:
    // Asks on `conn`, just opened (or come up), ahead of the calls it is
    // to carry, and forgets the last answer.  False if the question could
    // not be sent.
    bool ask(RedisConnection *conn, ngx_log_t *log) noexcept;

    bool available() const noexcept { return available_; }

    // Redis no longer knows the command (MODULE UNLOAD): the script until
    // the next connection asks again.
    void lost() noexcept;

private:
    static void on_reply(void *data, const Reply *reply) noexcept;

    RedisConnection *conn_ = nullptr;
    ngx_log_t *log_ = nullptr;
    bool available_ = false;
};

}  // namespace ratelimit
