// TZif files (RFC 8536) written by a test, so that the calendar's tests
// do not hang on the machine's tzdata: a zone's transitions, local time
// types and footer in, the file's bytes out.  And the machine's own file
// of a zone, for instants no tzdata release will change.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "calendar/civil_date.hpp"
#include "calendar/time_zone.hpp"

namespace ratelimit {

struct TzifSpec {
    char version = '2';                      // '\0' for version 1
    std::vector<std::int32_t> offsets = {0}; // the local time types
    std::vector<std::int64_t> times;         // the transitions, UTC
    std::vector<std::uint8_t> types;         // each transition's type
    std::string footer;                      // version 2 and later
};

// The seconds since 1970 of a UTC date and time.
inline std::int64_t utc_s(std::int64_t year, int month, int day,
                          int hour = 0, int minute = 0, int second = 0)
{
    return days_from_civil(year, month, day) * kDaySeconds + hour * 3600
           + minute * 60 + second;
}

inline void put_be(std::string *out, std::uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        out->push_back(static_cast<char>(v >> (8 * i) & 0xff));
    }
}

// A header: magic, version, 15 unused bytes, isutcnt, isstdcnt, leapcnt,
// timecnt, typecnt, charcnt.
inline void put_header(std::string *out, char version,
                       std::uint32_t timecnt, std::uint32_t typecnt)
{
    out->append("TZif");
    out->push_back(version);
    out->append(15, '\0');
    for (std::uint32_t count : {0u, 0u, 0u, timecnt, typecnt, 2u}) {
        put_be(out, count, 4);
    }
}

// A data block of `time_size`-byte times; every type is abbreviated "Z".
inline void put_block(std::string *out, const TzifSpec &spec,
                      int time_size)
{
    for (std::int64_t t : spec.times) {
        put_be(out, static_cast<std::uint64_t>(t), time_size);
    }
    for (std::uint8_t type : spec.types) {
        out->push_back(static_cast<char>(type));
    }
    for (std::int32_t offset : spec.offsets) {
        put_be(out, static_cast<std::uint32_t>(offset), 4);
        out->push_back('\0');   // isdst: not read
        out->push_back('\0');   // the abbreviation at 0
    }
    out->append("Z", 2);
}

// Version 1: the 32-bit block only.  Later: a version 1 block of one type
// and no transitions (as zic -b slim writes), the 64-bit block, the
// footer.
inline std::string tzif_bytes(const TzifSpec &spec)
{
    std::string out;
    auto timecnt = static_cast<std::uint32_t>(spec.times.size());
    auto typecnt = static_cast<std::uint32_t>(spec.offsets.size());

    if (spec.version == '\0') {
        put_header(&out, '\0', timecnt, typecnt);
        put_block(&out, spec, 4);
        return out;
    }

    put_header(&out, spec.version, 0, 1);
    put_block(&out, TzifSpec{}, 4);
    put_header(&out, spec.version, timecnt, typecnt);
    put_block(&out, spec, 8);
    return out + "\n" + spec.footer + "\n";
}

// A zone of no transitions, its footer deciding all time ("slim").
inline std::string footer_only(const std::string &footer)
{
    TzifSpec spec;
    spec.footer = footer;
    return tzif_bytes(spec);
}

// The bytes of the machine's file of zone `name`, if it has one.
inline std::optional<std::string> system_zone(const std::string &name)
{
    std::ifstream in("/usr/share/zoneinfo/" + name, std::ios::binary);

    if (!in) {
        return std::nullopt;
    }
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// The zone of `bytes`, which must be a good file (else a failure, and
// UTC).
inline TimeZone zone_of(const std::string &bytes)
{
    std::string error;
    std::optional<TimeZone> zone = TimeZone::from_tzif(bytes, &error);

    EXPECT_TRUE(zone) << error;
    return zone ? *zone : TimeZone::utc();
}

}  // namespace ratelimit
