#include "command/propagation.hpp"

#include <strings.h>

namespace ratelimit {

namespace {

// Whether watch_propagation() is on.
bool watching = false;

// Whether INFO, asked last, found nothing that listens, and no SYNC, PSYNC
// or role change has come since.
bool quiet = false;

bool named(const char *bytes, std::size_t len, const char *name,
           std::size_t name_len)
{
    return len == name_len && strncasecmp(bytes, name, len) == 0;
}

// Every command any client sends passes here first, SYNC and PSYNC before
// they make the backlog: a few compares.
void on_command(RedisModuleCommandFilterCtx *filter) noexcept
{
    if (!quiet) {
        return;
    }

    std::size_t len;
    const char *name = redis::StringPtrLen(
        redis::CommandFilterArgGet(filter, 0), &len);

    if (named(name, len, "sync", 4) || named(name, len, "psync", 5)) {
        quiet = false;
    }
}

void on_role_changed(redis::Ctx *, redis::Event,
                     unsigned long long, void *) noexcept
{
    quiet = false;
}

// shouldPropagate()'s replica test from INFO replication: the replication
// backlog (a replica that reconnects resyncs from it, so a backlog with no
// replica attached still counts) or a replica attached.
bool replicas_listen(redis::Ctx *ctx)
{
    RedisModuleServerInfoData *info = redis::GetServerInfo(ctx,
                                                           "replication");

    if (info == nullptr) {
        return true;
    }

    int no_backlog = 0, no_replicas = 0;
    unsigned long long backlog = redis::ServerInfoGetFieldUnsigned(
        info, "repl_backlog_active", &no_backlog);
    unsigned long long replicas = redis::ServerInfoGetFieldUnsigned(
        info, "connected_slaves", &no_replicas);
    redis::FreeServerInfo(ctx, info);
    return no_backlog != 0 || no_replicas != 0 || backlog != 0
           || replicas != 0;
}

}  // namespace

bool watch_propagation(redis::Ctx *ctx) noexcept
{
    watching = redis::RegisterCommandFilter(ctx, on_command, 0) != nullptr
               && redis::SubscribeToServerEvent(ctx, redis::kEventRoleChanged,
                                                on_role_changed)
                      == redis::kOk;
    return watching;
}

bool writes_propagate(redis::Ctx *ctx) noexcept
{
    if ((redis::GetContextFlags(ctx) & redis::kCtxAof) != 0) {
        return true;
    }

    if (quiet) {
        return false;
    }

    bool listen = replicas_listen(ctx);
    quiet = watching && !listen;
    return listen;
}

}  // namespace ratelimit
