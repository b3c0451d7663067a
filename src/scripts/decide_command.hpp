// The Redis module's command (redis_module/): the window script's work done
// natively, called with the script's arguments after EVALSHA's digest and
// answering its reply (see window_script.hpp), so nginx uses it in place of
// EVALSHA on a connection to a Redis that has it.
#pragma once

namespace ratelimit {

constexpr char kDecideCommand[] = "ratelimit.decide";

}  // namespace ratelimit
