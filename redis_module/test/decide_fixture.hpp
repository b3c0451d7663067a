// Calls decided by BatchDecider against a store in memory, as
// RATELIMIT.DECIDE decides them against Redis: zones given as nginx gives
// them, entries built as command/batch_call.cpp reads them, the clock set
// by the test.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "test/memory_store.hpp"
#include "zones/batch.hpp"
#include "zones/batch_decider.hpp"

namespace ratelimit::test {

// A zone's arguments: its limit, bucket (ms) and span (buckets; a GCRA
// zone's capacity; a calendar zone's two period ends in their place), its
// kind ('s' sliding, 'f' fixed, 'g' GCRA, 'c' calendar), whether the call
// asks for packed strings as its new keys, and of a side zone its side key
// base (zones/side_value.hpp), and of an enforced one that bans its ban's
// length in ms.  decide() reads them with parse_zone().
struct ZoneSpec {
    double limit, bucket_ms, span;
    char kind;
    bool enforce = true;
    bool packed = false;
    std::string_view side_base = {};
    double ban_ms = 0;
};

// The zone bytes of an entry.
inline const std::string_view kZone0("\0", 1);
inline const std::string_view kZone1("\1", 1);
inline const std::string_view kZones01("\0\1", 2);

// An entry of `mode` on `zones`, as parse_entry() makes it (decide()
// sets its `solo` from the call's zones).
Entry entry(char mode, std::string_view zones);
Entry settle_entry(double delta, double at, std::string_view zone);
Entry lease_entry(double asked, std::string_view zone);

// The reply of a request of one zone from element `r`: rejected, count,
// oldest bucket, over.
std::vector<double> one(const std::vector<ReplyElement> &reply,
                        std::size_t r = 1);

class DecideTest : public ::testing::Test {
protected:
    // A whole minute, in ms: fixed windows of a minute start at it.
    double now_ms = 28333333.0 * 60000;
    std::vector<ZoneSpec> zones;
    bool marked = false;  // the call names marker keys, after its count keys
    MemoryStore store;

    // The reply to a call of `entries` at now_ms (their keys numbered in
    // order, as the call's are; store.names names them).
    std::vector<ReplyElement> decide(const std::vector<Entry> &entries);

    // The bucket of now_ms in a zone of buckets of `bucket_ms`.
    double bucket(double bucket_ms) const;

    // Key `key` at now_ms, or nullptr.
    const MemoryStore::Value *live(const std::string &key);

    // Field `name` of key `key` ("" if none), its expiry time (-1 none).
    std::string field(const std::string &key, const std::string &name);
    double expire_at(const std::string &key);

    // The bytes of string `key` ("" if none, or a hash).
    std::string text(const std::string &key);
};

}  // namespace ratelimit::test
