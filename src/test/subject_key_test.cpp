#include "keys/subject_key.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/sha1.hpp"
#include "cluster/cluster_slot.hpp"

namespace ratelimit {
namespace {

constexpr char kCanary = '\x5a';
constexpr std::size_t kGuard = 16;

// Writes the key into a buffer of exactly subject_key_size() bytes followed
// by a guard, and checks the size agrees and the guard is untouched.
std::string key_of(std::string_view prefix, std::string_view zone,
                   std::string_view subject)
{
    std::size_t size = subject_key_size(prefix, zone, subject);
    std::vector<char> buf(size + kGuard, kCanary);
    std::size_t n = write_subject_key(prefix, zone, subject, buf.data());

    EXPECT_EQ(n, size);
    for (std::size_t i = size; i < buf.size(); i++) {
        EXPECT_EQ(buf[i], kCanary) << "overwrote guard byte " << i - size;
    }
    return std::string(buf.data(), n);
}

std::string hex_of(std::string_view data)
{
    char out[kSha1HexLength];
    sha1_hex(data, out);
    return std::string(out, kSha1HexLength);
}

TEST(SubjectKey, Plain)
{
    EXPECT_EQ(key_of("rl", "api", "1.2.3.4"), "rl:api:1.2.3.4");
    EXPECT_EQ(subject_key_size("rl", "api", "1.2.3.4"), 14u);
}

TEST(SubjectKey, EmptySubject)
{
    EXPECT_EQ(key_of("rl", "api", ""), "rl:api:");
    EXPECT_EQ(subject_key_size("rl", "api", ""), 7u);
}

TEST(SubjectKey, EmptyPrefixAndZone)
{
    EXPECT_EQ(key_of("", "", "x"), "::x");
}

TEST(SubjectKey, BinarySubjectKeptByteForByte)
{
    const std::string subject("a\0b\r\nc:\xff#", 9);
    std::string key = key_of("rl", "api", subject);
    EXPECT_EQ(key, std::string("rl:api:") + subject);
    EXPECT_EQ(key.size(), 7u + 9u);
}

TEST(SubjectKey, AtLimitKeptRaw)
{
    std::string subject(kMaxRawSubject, 'q');
    subject[0] = '\0';
    subject[kMaxRawSubject - 1] = '\n';
    std::string key = key_of("rl", "api", subject);
    EXPECT_EQ(key, "rl:api:" + subject);
    EXPECT_EQ(subject_key_size("rl", "api", subject), 7u + 256u);
}

TEST(SubjectKey, OverLimitHashed)
{
    std::string subject(kMaxRawSubject + 1, 'x');
    std::string key = key_of("rl", "api", subject);
    EXPECT_EQ(key, "rl:api#0796067748b6b0c2af864656a399f7722ef9283a");
    EXPECT_EQ(key, "rl:api#" + hex_of(subject));
    EXPECT_EQ(subject_key_size("rl", "api", subject), 7u + kSha1HexLength);
}

TEST(SubjectKey, HugeSubjectHashed)
{
    std::string subject(8192, '\0');
    for (std::size_t i = 0; i < subject.size(); i++) {
        subject[i] = static_cast<char>(i * 31);
    }
    std::string key = key_of("ratelimit", "login", subject);
    EXPECT_EQ(key, "ratelimit:login#" + hex_of(subject));
}

TEST(SubjectKey, DistinctLongSubjectsDistinctKeys)
{
    std::string a(300, 'a');
    std::string b = a;
    b[299] = 'b';
    EXPECT_NE(key_of("rl", "z", a), key_of("rl", "z", b));
}

TEST(SubjectKey, SizeMatchesForEveryLength)
{
    for (std::size_t len = 0; len <= kMaxRawSubject + 3; len++) {
        SCOPED_TRACE(len);
        std::string subject(len, 's');
        std::string key = key_of("p", "zone_1", subject);
        if (len <= kMaxRawSubject) {
            EXPECT_EQ(key, "p:zone_1:" + subject);
        } else {
            EXPECT_EQ(key, "p:zone_1#" + hex_of(subject));
        }
    }
}

// Writes into a buffer of exactly printable_subject_max_size() bytes with a
// guard after it.
std::string printable(std::string_view subject)
{
    constexpr std::size_t size = printable_subject_max_size();
    std::vector<char> buf(size + kGuard, kCanary);
    std::size_t n = write_printable_subject(subject, buf.data());

    EXPECT_LE(n, size);
    for (std::size_t i = size; i < buf.size(); i++) {
        EXPECT_EQ(buf[i], kCanary) << "overwrote guard byte " << i - size;
    }
    return std::string(buf.data(), n);
}

TEST(PrintableSubject, PrintableKept)
{
    EXPECT_EQ(printable("1.2.3.4"), "1.2.3.4");
    EXPECT_EQ(printable(" ~user@example.com!"), " ~user@example.com!");
    EXPECT_EQ(printable(""), "");
}

TEST(PrintableSubject, EscapesQuoteBackslashAndNonPrintable)
{
    EXPECT_EQ(printable("a\"b"), "a\\x22b");
    EXPECT_EQ(printable("a\\b"), "a\\x5cb");
    EXPECT_EQ(printable(std::string_view("\0", 1)), "\\x00");
    EXPECT_EQ(printable("\r\n\t"), "\\x0d\\x0a\\x09");
    EXPECT_EQ(printable("\x1f\x7f\x80\xff"), "\\x1f\\x7f\\x80\\xff");
    EXPECT_EQ(printable("\x20\x7e"), " ~");
}

TEST(PrintableSubject, AtLimitNotCut)
{
    std::string subject(kMaxLoggedSubject, 'k');
    EXPECT_EQ(printable(subject), subject);
}

TEST(PrintableSubject, CutWithEllipsis)
{
    std::string subject(kMaxLoggedSubject + 1, 'k');
    EXPECT_EQ(printable(subject), std::string(kMaxLoggedSubject, 'k') + "...");

    std::string longer = std::string(kMaxLoggedSubject, 'a') + "bcdef";
    EXPECT_EQ(printable(longer), std::string(kMaxLoggedSubject, 'a') + "...");
}

TEST(PrintableSubject, CutCountsInputBytes)
{
    // 64 input bytes escape to 4 output bytes each.
    std::string subject(kMaxLoggedSubject + 10, '\xff');
    std::string expected;
    for (std::size_t i = 0; i < kMaxLoggedSubject; i++) {
        expected += "\\xff";
    }
    expected += "...";
    std::string got = printable(subject);
    EXPECT_EQ(got, expected);
    EXPECT_EQ(got.size(), printable_subject_max_size());
}

TEST(PrintableSubject, EscapedAtLimitNotCut)
{
    std::string subject(kMaxLoggedSubject, '"');
    std::string got = printable(subject);
    EXPECT_EQ(got.size(), 4 * kMaxLoggedSubject);
    EXPECT_EQ(got.substr(0, 8), "\\x22\\x22");
    EXPECT_NE(got.substr(got.size() - 3), "...");
}

TEST(PrintableSubject, NeverOverflowsForAnyByteMix)
{
    for (int b = 0; b < 256; b++) {
        SCOPED_TRACE(b);
        for (std::size_t len : {std::size_t{1}, kMaxLoggedSubject - 1,
                                kMaxLoggedSubject, kMaxLoggedSubject + 1,
                                std::size_t{1000}})
        {
            std::string subject(len, static_cast<char>(b));
            std::string got = printable(subject);
            bool kept = b >= 0x20 && b < 0x7f && b != '"' && b != '\\';
            std::size_t shown = std::min(len, kMaxLoggedSubject);
            std::size_t expected = shown * (kept ? 1 : 4)
                                   + (len > kMaxLoggedSubject ? 3 : 0);
            EXPECT_EQ(got.size(), expected);
        }
    }
}

std::string tagged_key(std::string_view subject, std::string_view secret)
{
    HashTag tag{secret};
    std::string key(subject_key_size("rl", "api", subject, &tag), '?');
    key.resize(write_subject_key("rl", "api", subject, key.data(), &tag));
    return key;
}

// Redis Cluster's hash tag: what lies between the first '{' and the first
// '}' after it, if that is not empty; else the whole key.
std::string_view cluster_tag(std::string_view key)
{
    std::size_t open = key.find('{');
    std::size_t close = open == std::string_view::npos
                        ? open : key.find('}', open + 1);

    if (close == std::string_view::npos || close == open + 1) {
        return key;
    }
    return key.substr(open + 1, close - open - 1);
}

TEST(SubjectKey, TaggedForClusterByAKeyedDigestOfTheSubject)
{
    std::string subject("a}b\0", 4);
    std::string key = tagged_key(subject, "fleet secret");
    char tag[kHashTagLength];
    digest_hex(hmac_sha1("fleet secret", subject), kHashTagLength, tag);

    EXPECT_EQ(key, "rl:api:{" + std::string(tag, kHashTagLength) + "}"
                   + subject);
    EXPECT_EQ(cluster_tag(key), std::string_view(tag, kHashTagLength));
}

TEST(SubjectKey, ClientsCannotPickTheTag)
{
    // Before, "a}x" and "a}y" both had the tag "a".
    std::string a = tagged_key("a}x", "s"), b = tagged_key("a}y", "s");
    EXPECT_NE(cluster_tag(a), cluster_tag(b));
    EXPECT_NE(cluster_tag(a), "a");
    // A '{' in the subject comes after the tag: it cannot move it.
    EXPECT_EQ(cluster_tag(tagged_key("{x}", "s")).size(), kHashTagLength);
    // Another secret, another tag.
    EXPECT_NE(cluster_tag(tagged_key("a", "s")),
              cluster_tag(tagged_key("a", "t")));
    // One subject, one tag, whatever the zone: its zones share a slot.
    HashTag tag{"s"};
    std::string other(subject_key_size("rl", "z2", "a", &tag), '?');
    other.resize(write_subject_key("rl", "z2", "a", other.data(), &tag));
    EXPECT_EQ(cluster_tag(other), cluster_tag(tagged_key("a", "s")));
}

TEST(SubjectKey, TaggedLongSubjectKeepsItsDigest)
{
    std::string big(300, 'x');
    std::string key = tagged_key(big, "");
    char digest[kSha1HexLength];
    sha1_hex(big, digest);

    ASSERT_EQ(key.size(), 7 + 2 + kHashTagLength + kSha1HexLength);
    EXPECT_EQ(key.substr(0, 8), "rl:api#{");
    EXPECT_EQ(key.substr(8 + kHashTagLength, 1), "}");
    EXPECT_EQ(key.substr(9 + kHashTagLength),
              std::string(digest, kSha1HexLength));
}

// The side key write_side_key() makes of side key base `base` and count
// key `key`, in a buffer of exactly base.size() + key.size() bytes followed
// by a guard, which it must leave untouched.
std::string side_key_of(std::string_view base, std::string_view key)
{
    std::vector<char> buf(base.size() + key.size() + kGuard, kCanary);
    std::size_t n = write_side_key(base, key, buf.data());

    EXPECT_LE(n, base.size() + key.size());
    for (std::size_t i = base.size() + key.size(); i < buf.size(); i++) {
        EXPECT_EQ(buf[i], kCanary) << "overwrote guard byte " << i;
    }
    return std::string(buf.data(), n);
}

// The window script's rule (override.lua's side_value()), base ..
// string.sub(key, #base): the count key from its byte #base on, 1-based,
// after the base; "" where the key is shorter.  Each expected key below is
// what Lua 5.1 makes of the same two strings.
TEST(SideKey, TheWindowScriptsRule)
{
    char base[16];
    std::string_view api(base, write_side_base("rl", "api", base));
    ASSERT_EQ(api, "rl:api+");

    EXPECT_EQ(side_key_of(api, key_of("rl", "api", "1.2.3.4")),
              "rl:api+:1.2.3.4");
    EXPECT_EQ(side_key_of(api, key_of("rl", "api", "")), "rl:api+:");
    std::string binary("a\0\xff", 3);
    EXPECT_EQ(side_key_of(api, key_of("rl", "api", binary)),
              "rl:api+:" + binary);

    std::string big(kMaxRawSubject + 1, 'x');
    EXPECT_EQ(side_key_of(api, key_of("rl", "api", big)),
              "rl:api+#" + hex_of(big));

    // Shorter than the base: string.sub() past the key's end is "".
    EXPECT_EQ(side_key_of(api, "rl:a"), "rl:api+");
    EXPECT_EQ(side_key_of(api, ""), "rl:api+");
    EXPECT_EQ(side_key_of(api, "rl:api"), "rl:api+");
}

// In a Redis Cluster the side key carries its count key's tag, so both
// sit in one slot: the call that counts the subject reads its side key.
TEST(SideKey, KeepsTheCountKeysClusterSlot)
{
    char base[16];
    std::string_view api(base, write_side_base("rl", "api", base));

    for (std::string_view subject : {"alice", "{alice}", "a}x"}) {
        std::string key = tagged_key(subject, "fleet secret");
        std::string side = side_key_of(api, key);
        std::string tag = "{" + std::string(cluster_tag(key)) + "}";

        EXPECT_EQ(side, "rl:api+:" + tag + std::string(subject));
        EXPECT_EQ(key_slot(side), key_slot(key));
    }

    std::string big(kMaxRawSubject + 1, 'x');
    std::string key = tagged_key(big, "fleet secret");
    EXPECT_EQ(side_key_of(api, key), "rl:api+" + key.substr(6));
    EXPECT_EQ(key_slot(side_key_of(api, key)), key_slot(key));
}

}  // namespace
}  // namespace ratelimit
