// Whether Redis sends a command's writes anywhere: to the AOF or to
// replicas.  Redis itself drops what a command replicates when neither
// listens (server.c, shouldPropagate(): the AOF off, and a master with no
// replica and no replication backlog); knowing that, the command spares
// building each write's copy (RM_Replicate looks its command name up and
// copies its arguments: about a sixth of the command's instructions on a
// sliding zone, a quarter on a fixed one, callgrind) only for Redis to
// throw it away.
//
// Asking INFO costs what a call of 60 requests saves, so its answer is
// kept while nothing can have changed it: a replica gets the stream (and a
// master its backlog) only by sending SYNC or PSYNC, and a Redis whose
// role changes may hold a backlog made elsewhere.  Either sends the next
// call to INFO again.  The AOF's state is the context's, read every call.
#pragma once

#include "api/redis_module_api.hpp"

namespace ratelimit {

// Watches for SYNC, PSYNC and role changes (OnLoad): false if Redis would
// not let it, and then writes_propagate() always asks INFO.
bool watch_propagation(redis::Ctx *ctx) noexcept;

// True when a write replicated now would reach the AOF or a replica (or
// when Redis does not say: replicating is then the safe side).
bool writes_propagate(redis::Ctx *ctx) noexcept;

}  // namespace ratelimit
