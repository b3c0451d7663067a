// RATELIMIT.DECIDE: the window script as a native Redis command.  Same
// arguments as the script's EVALSHA after its digest, the same flat reply,
// the same keys, hash fields and expiry times, and the same handling of
// clock steps, junk fields, keys of another type and out of memory: the
// command follows the script's code path for path, Redis command for Redis
// command (see scripts/window_script.cpp, whose comments explain each rule),
// and t/19 runs both on the same batches.
//
//   RATELIMIT.DECIDE numkeys key... zones zone-arg... entry...
//
// A zone's limit, bucket or span other than nginx sends (whole numbers in
// the ranges of window_rules.hpp) fails the whole call, as in the script.
// Where the script's behaviour is not defined by what nginx sends (an entry
// naming a zone or key the call lacks, keys other than the entries' and
// the marker keys the call names, an interval peek of 0 buckets, a cost
// above 2^53), the command refuses the whole call with an error instead.
// A malformed settle is that entry's error, as in the script.  Side keys
// (a zone's subjects' overrides) are made from the count keys, as the
// script makes them, and read undeclared.
#pragma once

#include "api/redis_module_api.hpp"
#include "scripts/decide_command.hpp"

namespace ratelimit {

// The command, as Redis calls it; also answers Redis's question of where
// its keys are (getkeys-api).
int decide_command(redis::Ctx *ctx, redis::String **argv, int argc) noexcept;

}  // namespace ratelimit
