// The Redis module's command (redis_module/): the window script's work done
// natively, called with the script's arguments after EVALSHA's digest and
// answering its reply (see window_script.hpp), so nginx uses it in place of
// EVALSHA on a connection to a Redis that has it.
#pragma once

namespace ratelimit {

constexpr char kDecideCommand[] = "ratelimit.decide";

// How the command refuses a call whose number of zones it cannot read,
// before any key: a Redis module of the release before so refuses every
// call of this one (the number carries a layout letter, batch_protocol.hpp),
// which the script then decides.
constexpr char kZoneCountRefused[] =
    "ERR ratelimit: the number of zones is missing or too large";

// How the command refuses a zone whose kind or mode it does not know,
// before any key (it reads every zone first): a Redis module of the
// releases before bans so refuses a zone that bans (kZoneEnforcedBan),
// which the script then decides.  nginx sends no other such zone.
constexpr char kZoneModeRefused[] =
    "ERR ratelimit: unknown zone kind or mode";

}  // namespace ratelimit
