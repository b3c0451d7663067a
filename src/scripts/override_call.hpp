// Setting or removing a subject's override (`ratelimit_query ...
// override=on`, PUT): the call that writes its side key and its zone's
// marker in one script and tells every worker of the fleet on the forgive
// channel (scripts/forgive_call.hpp), as forgiving does, so that no
// rejection remembered under the old limit outlives it.
//
// The side key keeps its parts other than the override's; a set override
// is "o=L,W,X" (protocol/batch_protocol.hpp), X Redis's time in ms at
// which it lapses (0: never), and the key expires with its latest part
// (kept without expiry while one never lapses).  The marker, a sorted set
// of side keys by the time they lapse (+inf: never), exists while one may
// hold an override: each call drops those past their time, and the
// marker expires with its latest (see window_script.hpp).  Redis's clock
// stamps both, as the window script reads them.
#pragma once

#include <string>
#include <string_view>

#include "limits/override.hpp"

namespace ratelimit {

// EVAL of that script: KEYS the side key and the marker (in a Redis
// Cluster, of one slot), then the channel and the message.  Its reply:
// the number of subscribers the message reached, and the limit of the
// override it replaced, -1 if none was in force.  Throws std::bad_alloc.
std::string format_override_call(std::string_view side_key,
                                 std::string_view marker,
                                 std::string_view channel,
                                 std::string_view message,
                                 const OverrideChange &change);

}  // namespace ratelimit
