// What a main request's settles need, a part of its RequestState: written
// by rate/ (counted, when its call's reply admits it; settled, by
// rate/reservations.cpp) and by http/ (its reservations taken back, when a
// late slot refuses it).
#pragma once

namespace ratelimit {

struct SettlePart {
    bool reserved;  // Redis counted it: its zones may be settled
    bool settled;   // its settles are made: it makes none again
};

}  // namespace ratelimit
