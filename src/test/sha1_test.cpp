#include "base/sha1.hpp"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "scripts/window_script.hpp"

namespace ratelimit {
namespace {

std::string hex_of(std::string_view data)
{
    // One spare byte after the digest catches a write past the end.
    char out[kSha1HexLength + 1];
    out[kSha1HexLength] = '#';
    sha1_hex(data, out);
    EXPECT_EQ(out[kSha1HexLength], '#');
    return std::string(out, kSha1HexLength);
}

std::string hmac_hex(std::string_view key, std::string_view data)
{
    char out[kSha1HexLength];
    digest_hex(hmac_sha1(key, data), kSha1HexLength, out);
    return std::string(out, kSha1HexLength);
}

// RFC 2202's test cases 2 and 6 (a key longer than a block), and an empty
// key.
TEST(Sha1, HmacVectors)
{
    EXPECT_EQ(hmac_hex("Jefe", "what do ya want for nothing?"),
              "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
    EXPECT_EQ(hmac_hex(std::string(80, '\xaa'),
                       "Test Using Larger Than Block-Size Key - Hash Key "
                       "First"),
              "aa4ae5e15272d00e95705637ce8a3b55ed402112");
    EXPECT_EQ(hmac_hex("", ""), "fbdb1d1b18aa6c08324b7d64b71fb76370690e1d");
}

TEST(Sha1, FipsVectors)
{
    EXPECT_EQ(hex_of(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    EXPECT_EQ(hex_of("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
    EXPECT_EQ(
        hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    EXPECT_EQ(hex_of(std::string(1000000, 'a')),
              "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

TEST(Sha1, QuickBrownFox)
{
    EXPECT_EQ(hex_of("The quick brown fox jumps over the lazy dog"),
              "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12");
}

// Lengths around the 55/56/64-byte padding boundaries; expected values from
// `head -c N /dev/zero | tr '\0' a | sha1sum`.
TEST(Sha1, PaddingBoundaries)
{
    struct Case {
        std::size_t length;
        const char *hex;
    };
    const Case cases[] = {
        {55, "c1c8bbdc22796e28c0e15163d20899b65621d65a"},
        {56, "c2db330f6083854c99d4b5bfb6e8f29f201be699"},
        {63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5"},
        {64, "0098ba824b5c16427bd7a1122a5a442a25ec644d"},
        {65, "11655326c708d70319be2610e8a57d9a5b959d3b"},
        {119, "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56"},
        {120, "f34c1488385346a55709ba056ddd08280dd4c6d6"},
        {128, "ad5b3fdbcb526778c2839d2f151ea753995e26a0"},
    };

    for (const Case &c : cases) {
        SCOPED_TRACE(c.length);
        EXPECT_EQ(hex_of(std::string(c.length, 'a')), c.hex);
    }
}

TEST(Sha1, BinaryInput)
{
    EXPECT_EQ(hex_of(std::string_view("\0", 1)),
              "5ba93c9db0cff93f52b521d7420e43f6eda2784f");
    EXPECT_EQ(hex_of(std::string_view("a\0b\r\n\0\xff", 7)),
              "615f16e5780fb4168e5459d594bc8905f377bfcb");

    std::string all;
    for (int round = 0; round < 2; round++) {
        for (int b = 0; b < 256; b++) {
            all.push_back(static_cast<char>(b));
        }
    }
    EXPECT_EQ(hex_of(all), "dbe649daba340bce7a44b809016d914839b99f10");
}

TEST(Sha1, HexMatchesDigest)
{
    std::string data(100, 'z');
    Sha1Digest digest = sha1(data);
    std::string hex = hex_of(data);

    ASSERT_EQ(hex.size(), 2 * digest.size());
    for (std::size_t i = 0; i < digest.size(); i++) {
        char byte[3];
        std::snprintf(byte, sizeof(byte), "%02x", digest[i]);
        EXPECT_EQ(hex.substr(2 * i, 2), byte) << "byte " << i;
    }
}

TEST(Sha1, DigestBytes)
{
    const Sha1Digest expected = {0xa9, 0x99, 0x3e, 0x36, 0x47, 0x06, 0x81,
                                 0x6a, 0xba, 0x3e, 0x25, 0x71, 0x78, 0x50,
                                 0xc2, 0x6c, 0x9c, 0xd0, 0xd8, 0x9d};
    EXPECT_EQ(sha1("abc"), expected);
}

TEST(Sha1, OnlyTheViewIsHashed)
{
    const char text[] = "abcdef";
    EXPECT_EQ(hex_of(std::string_view(text, 3)),
              "a9993e364706816aba3e25717850c26c9cd0d89d");
}

TEST(WindowScriptSha1, MatchesScript)
{
    std::string_view digest = window_script_sha1();
    ASSERT_EQ(digest.size(), kSha1HexLength);
    EXPECT_EQ(std::string(digest), hex_of(window_script()));
    for (char c : digest) {
        EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) << c;
    }
    EXPECT_EQ(window_script_sha1().data(), digest.data());
}

}  // namespace
}  // namespace ratelimit
