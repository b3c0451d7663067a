// Window zones whose keys are packed strings (zones/packed_zone.hpp),
// decided against the store in memory: the bytes each write leaves, a
// count changed in place, buckets added and slid past, settles, leases and
// interval peeks; and a key written in the layout of new keys: a hash met
// where new keys are strings is made a string by its first write, and a
// string met where they are hashes a hash; a read that writes nothing
// leaves either as it is.
#include "test/decide_fixture.hpp"
#include "test/packed_bytes.hpp"

namespace ratelimit::test {

namespace {

using V = std::vector<double>;

class PackedTest : public DecideTest {
protected:
    void count(int n, std::string_view zone = kZone0)
    {
        for (int i = 0; i < n; i++) {
            decide({entry('c', zone)});
        }
    }
};

TEST_F(PackedTest, SlidingCountsInPlaceToItsLimit)
{
    zones = {{3, 1000, 10, 's', true, true}};
    double b = bucket(1000);

    for (double n = 1; n <= 3; n++) {
        EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, n, b, 0}));
    }

    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{1, 3, b, 1}));
    EXPECT_EQ(text("0"), sliding(b, {{0, 3}}, 3));
    EXPECT_EQ(expire_at("0"), (b + 10) * 1000);
    EXPECT_EQ(store.writes, (std::vector<std::string>{"SET", "SETRANGE",
                                                      "SETRANGE"}));
}

TEST_F(PackedTest, SlidingAddsBucketsAndCutsThoseThatLeft)
{
    zones = {{3, 1000, 10, 's', true, true}};
    double b = bucket(1000);
    count(2);
    now_ms += 5000;
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 3, b, 0}));
    EXPECT_EQ(text("0"), sliding(b, {{0, 2}, {5, 1}}, 3));
    EXPECT_EQ(expire_at("0"), (b + 15) * 1000);

    // Bucket b leaves the window: its 2 units go, and so does its entry.
    now_ms += 5000;
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 2, b + 5, 0}));
    EXPECT_EQ(text("0"), sliding(b, {{5, 1}, {10, 1}}, 2));
    EXPECT_EQ(expire_at("0"), (b + 20) * 1000);

    // A peek after the window slid writes the string cut, its expiry kept.
    now_ms += 6000;
    EXPECT_EQ(one(decide({entry('p', kZone0)})), (V{0, 1, b + 10, 0}));
    EXPECT_EQ(text("0"), sliding(b, {{10, 1}}, 1));
    EXPECT_EQ(expire_at("0"), (b + 20) * 1000);
}

TEST_F(PackedTest, FixedCountsInPlaceAndStartsAfreshEachWindow)
{
    zones = {{2, 60000, 1, 'f', true, true}};
    double w = bucket(60000);
    count(2);
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{1, 2, w, 1}));
    EXPECT_EQ(text("0"), le(w, 8) + le(2, 8));
    EXPECT_EQ(expire_at("0"), (w + 1) * 60000);
    EXPECT_EQ(store.writes, (std::vector<std::string>{"SET", "SETRANGE"}));

    store.keys["0"].expire_at_ms = -1;
    now_ms += 60000;
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 1, w + 1, 0}));
    EXPECT_EQ(text("0"), le(w + 1, 8) + le(1, 8));
    EXPECT_EQ(expire_at("0"), (w + 2) * 60000);
}

// A hash made before the switch, met where new keys are strings: a peek
// leaves it a hash; the first count makes it the string of its buckets and
// expiry, which the next count changes in place.
TEST_F(PackedTest, AHashIsMadeAStringByItsFirstWrite)
{
    zones = {{5, 1000, 10, 's'}, {5, 60000, 1, 'f'}};
    double b = bucket(1000), w = bucket(60000);
    decide({entry('c', kZones01)});
    now_ms += 2000;
    decide({entry('c', kZones01)});
    zones[0].packed = zones[1].packed = true;
    store.writes.clear();
    EXPECT_EQ(decide({entry('p', kZones01)})[2].value, 2);
    EXPECT_EQ(field("0", "t") + field("1", "t"), "22");
    EXPECT_EQ(store.writes, std::vector<std::string>{});

    now_ms += 3000;
    EXPECT_EQ(decide({entry('c', kZones01)})[2].value, 3);
    EXPECT_EQ(text("0"), sliding(b, {{0, 1}, {2, 1}, {5, 1}}, 3));
    EXPECT_EQ(expire_at("0"), (b + 15) * 1000);
    EXPECT_EQ(text("1"), le(w, 8) + le(3, 8));
    EXPECT_EQ(expire_at("1"), (w + 1) * 60000);
    EXPECT_EQ(decide({entry('c', kZones01)})[5].value, 4);
    EXPECT_EQ(text("0"), sliding(b, {{0, 1}, {2, 1}, {5, 2}}, 4));
    EXPECT_EQ(text("1"), le(w, 8) + le(4, 8));
    EXPECT_EQ(store.writes, (std::vector<std::string>{"SET", "SET",
                                                      "SETRANGE",
                                                      "SETRANGE"}));
}

// A hash whose counts 8 bytes do not hold (here below 0) is read and
// written as a hash, as before the layout.
TEST_F(PackedTest, AHashOfCountsNoStringHoldsStaysAHash)
{
    zones = {{3, 1000, 10, 's', true, true}};
    std::string b = std::to_string(static_cast<long long>(bucket(1000)));
    store.keys["0"].fields = {{"t", "-5"}, {"o", b}, {"n", b}, {b, "-5"}};
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, -4, bucket(1000), 0}));
    EXPECT_EQ(field("0", "t") + " " + field("0", b), "-4 -4");
}

// A hash of none of the window's fields is no window's to delete: it is
// counted in as a hash, as the release before counts in it.
TEST_F(PackedTest, AHashOfOtherFieldsStaysAHash)
{
    zones = {{3, 1000, 10, 's', true, true}};
    store.keys["0"].fields["x"] = "1";
    Entry costs = entry('w', kZone0);
    costs.costs = {1};
    decide({costs});
    EXPECT_EQ(field("0", "t"), "1");
    EXPECT_EQ(field("0", "x"), "1");
}

// A string met where new keys are hashes (a server of the release before
// about to share the Redis): a peek leaves it a string; the first count
// makes it the hash of its buckets and expiry, which the release before
// reads.  Then, new keys strings again, a peek that slides the window
// writes it, and so makes it a string.
TEST_F(PackedTest, AStringIsMadeAHashByItsFirstWrite)
{
    zones = {{3, 1000, 10, 's', true, true}, {5, 60000, 1, 'f', true, true}};
    double b = bucket(1000), w = bucket(60000);
    auto text_of = [](double x) {
        return std::to_string(static_cast<long long>(x));
    };
    decide({entry('c', kZones01)});
    now_ms += 1000;
    decide({entry('c', kZones01)});
    zones[0].packed = zones[1].packed = false;
    store.writes.clear();
    decide({entry('p', kZones01)});
    EXPECT_EQ(text("0"), sliding(b, {{0, 1}, {1, 1}}, 2));
    EXPECT_EQ(store.writes, std::vector<std::string>{});

    now_ms += 1000;
    decide({entry('c', kZones01)});
    EXPECT_EQ(text("0") + text("1"), "");
    EXPECT_EQ(store.keys["0"].fields,
              (std::map<std::string, std::string>{
                  {"t", "3"}, {"o", text_of(b)}, {"n", text_of(b + 2)},
                  {text_of(b), "1"}, {text_of(b + 1), "1"},
                  {text_of(b + 2), "1"}}));
    EXPECT_EQ(expire_at("0"), (b + 12) * 1000);
    EXPECT_EQ(store.keys["1"].fields,
              (std::map<std::string, std::string>{{"t", "3"},
                                                  {"n", text_of(w)}}));
    EXPECT_EQ(expire_at("1"), (w + 1) * 60000);
    EXPECT_EQ(store.writes,
              (std::vector<std::string>{"DEL", "HSET", "PEXPIREAT", "DEL",
                                        "HSET", "PEXPIREAT"}));

    zones[0].packed = true;
    now_ms += 8000;
    EXPECT_EQ(one(decide({entry('p', kZone0)})), (V{0, 2, b + 1, 0}));
    EXPECT_EQ(text("0"), sliding(b + 1, {{0, 1}, {1, 1}}, 2));
}

// A window of more buckets than an HSET sets (256) made a hash: one HSET
// for each 256 fields.
TEST_F(PackedTest, AStringOfManyBucketsIsMadeAHashInSeveralHsets)
{
    zones = {{1000, 1000, 400, 's', true, true}};

    for (int i = 0; i < 300; i++, now_ms += 1000) {
        count(1);
    }

    zones[0].packed = false;
    store.writes.clear();
    EXPECT_EQ(one(decide({entry('c', kZone0)}))[1], 301);
    EXPECT_EQ(store.keys["0"].fields.size(), 3 + 301U);
    EXPECT_EQ(field("0", "t"), "301");
    EXPECT_EQ(store.writes, (std::vector<std::string>{"DEL", "HSET", "HSET",
                                                      "PEXPIREAT"}));
}

// Keys of both layouts in one request: each written as it was.
TEST_F(PackedTest, BothLayoutsInOneRequest)
{
    zones = {{3, 1000, 10, 's'}, {3, 1000, 10, 's', true, true}};
    double b = bucket(1000);
    store.names = {"hash", "string"};
    decide({entry('c', kZone0), entry('c', kZone1)});
    std::vector<ReplyElement> reply = decide({entry('c', kZones01)});
    EXPECT_EQ(reply[2].value, 2);
    EXPECT_EQ(reply[5].value, 2);
    EXPECT_EQ(field("hash", "t"), "2");
    EXPECT_EQ(text("string"), sliding(b, {{0, 2}}, 2));
}

// A settle into a bucket the string does not hold adds its entry where its
// number puts it (one older than the base moves the base); a bucket given
// back to 0 keeps its entry.
TEST_F(PackedTest, SettlesPutTheirBucketsInOrder)
{
    zones = {{20, 1000, 10, 's', true, true}};
    double b = bucket(1000);
    count(2);
    now_ms += 3000;
    count(1);
    std::vector<ReplyElement> reply = decide({settle_entry(2, b + 1, kZone0)});
    EXPECT_EQ(one(reply), (V{0, 5, b, 2}));
    EXPECT_EQ(text("0"), sliding(b, {{0, 2}, {1, 2}, {3, 1}}, 5));
    reply = decide({settle_entry(-3, b, kZone0)});
    EXPECT_EQ(one(reply), (V{0, 3, b, -2}));
    reply = decide({settle_entry(1, b - 2, kZone0)});
    EXPECT_EQ(one(reply), (V{0, 4, b - 2, 1}));
    EXPECT_EQ(text("0"),
              sliding(b - 2, {{0, 1}, {2, 0}, {3, 2}, {5, 1}}, 4));
    EXPECT_EQ(expire_at("0"), (b + 13) * 1000);

    // Into the newest bucket: in place.
    store.writes.clear();
    reply = decide({settle_entry(-1, b + 3, kZone0)});
    EXPECT_EQ(store.writes, std::vector<std::string>{"SETRANGE"});
    EXPECT_EQ(one(reply), (V{0, 3, b - 2, -1}));
    EXPECT_EQ(text("0"),
              sliding(b - 2, {{0, 1}, {2, 0}, {3, 2}, {5, 0}}, 3));
}

TEST_F(PackedTest, FixedSettleAndAnEmptyKeysSettle)
{
    zones = {{5, 60000, 1, 'f', true, true}, {5, 1000, 10, 's', true, true}};
    double w = bucket(60000), b = bucket(1000);
    store.names = {"fixed", "sliding"};
    count(3);
    EXPECT_EQ(one(decide({settle_entry(-2, w, kZone0)})), (V{0, 1, w, -2}));
    EXPECT_EQ(text("fixed"), le(w, 8) + le(1, 8));
    EXPECT_EQ(one(decide({entry('c', kZone0),
                          settle_entry(4, b - 1, kZone1)})),
              (V{0, 2, w, 0}));
    EXPECT_EQ(text("sliding"), sliding(b - 1, {{0, 4}}, 4));
    EXPECT_EQ(expire_at("sliding"), (b + 9) * 1000);
}

// A count past the width makes the string anew, wider; it stays as wide
// when that bucket leaves.
TEST_F(PackedTest, ACountPastItsWidthWidensTheString)
{
    zones = {{70000, 1000, 10, 's', true, true}};
    double b = bucket(1000);
    Entry costs = entry('w', kZone0);
    costs.costs = {300};
    decide({costs});
    EXPECT_EQ(text("0"), le(2, 1) + le(b, 8) + le(0, 2) + le(300, 2)
                             + le(300, 8));
    costs.costs = {65236};
    store.writes.clear();
    decide({costs});
    EXPECT_EQ(text("0")[0], 4);
    EXPECT_EQ(store.writes, std::vector<std::string>{"SET"});
    now_ms += 1000;
    count(1);
    now_ms += 9000;
    count(1);
    EXPECT_EQ(text("0"), le(4, 1) + le(b, 8) + le(1, 2) + le(1, 4)
                             + le(10, 2) + le(1, 4) + le(2, 8));
}

TEST_F(PackedTest, AClockSteppedBackCountsInTheNewestBucket)
{
    zones = {{9, 1000, 10, 's', true, true}};
    double b = bucket(1000);
    store.keys["0"] = MemoryStore::Value{
        false, {}, sliding(b + 3, {{0, 1}, {2, 1}}, 2), (b + 15) * 1000};
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 3, b + 3, 0}));
    EXPECT_EQ(text("0"), sliding(b + 3, {{0, 1}, {2, 2}}, 3));
    Entry peek = entry('i', kZone0);
    peek.wanted = {1};
    EXPECT_EQ(decide({peek})[5].value, 2);
}

// A string of another shape is no window's: the request's error, the
// string left alone.  One of another bucket length starts afresh.
TEST_F(PackedTest, AnotherShapeIsWrongTypeAnotherLengthStartsAfresh)
{
    zones = {{3, 1000, 10, 's', true, true}};
    double b = bucket(1000);
    store.keys["0"] = MemoryStore::Value{false, {}, "garbage", -1};
    std::vector<ReplyElement> reply = decide({entry('c', kZone0)});
    EXPECT_STREQ(reply[1].error, kWrongType);
    EXPECT_EQ(text("0"), "garbage");

    store.keys["0"] = MemoryStore::Value{
        false, {}, sliding(b - 500, {{0, 7}}, 7), -1};
    EXPECT_EQ(one(decide({entry('c', kZone0)})), (V{0, 1, b, 0}));
    EXPECT_EQ(text("0"), sliding(b, {{0, 1}}, 1));
}

// A zone whose algorithm changed meets the other kind's string: started
// afresh, as the hash of another kind is.
TEST_F(PackedTest, AnotherKindOfWindowStartsAfresh)
{
    zones = {{3, 1000, 10, 's', true, true}, {3, 60000, 1, 'f', true, true}};
    double b = bucket(1000), w = bucket(60000);
    store.names = {"was fixed", "was sliding"};
    store.keys["was fixed"] = MemoryStore::Value{
        false, {}, le(w, 8) + le(3, 8), -1};
    store.keys["was sliding"] = MemoryStore::Value{
        false, {}, sliding(w, {{0, 3}}, 3), -1};
    decide({entry('c', kZone0), entry('c', kZone1)});
    EXPECT_EQ(text("was fixed"), sliding(b, {{0, 1}}, 1));
    EXPECT_EQ(text("was sliding"), le(w, 8) + le(1, 8));
}

TEST_F(PackedTest, IntervalPeekSumsTheNewestBuckets)
{
    zones = {{9, 1000, 10, 's', true, true}};
    count(2);
    now_ms += 3000;
    count(1);
    Entry peek = entry('i', kZone0);
    peek.wanted = {1};
    std::vector<ReplyElement> reply = decide({peek});
    EXPECT_EQ(reply[2].value, 3);
    EXPECT_EQ(reply[5].value, 1);
    peek.wanted = {4};
    EXPECT_EQ(decide({peek})[5].value, 3);
}

TEST_F(PackedTest, LeaseGrantsWhatIsLeft)
{
    zones = {{5, 1000, 10, 's', true, true}};
    double b = bucket(1000);
    count(3);
    std::vector<ReplyElement> reply = decide({lease_entry(4, kZone0)});
    EXPECT_EQ(one(reply), (V{0, 5, b, 1}));
    EXPECT_EQ(reply[5].value, 2);
    EXPECT_EQ(text("0"), sliding(b, {{0, 5}}, 5));
}

// Bucket numbers are 2 bytes past the base: a window of more buckets keeps
// its new keys hashes.
TEST_F(PackedTest, AWindowOfManyBucketsMakesHashes)
{
    zones = {{5, 1, 70000, 's', true, true}};
    count(1);
    EXPECT_EQ(field("0", "t"), "1");
}

}  // namespace

}  // namespace ratelimit::test
