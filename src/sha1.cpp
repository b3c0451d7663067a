#include "sha1.hpp"

#include <cstring>

namespace ratelimit {

namespace {

constexpr std::uint32_t rotl(std::uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

class Sha1 {
public:
    void update(const std::uint8_t *data, std::size_t len)
    {
        length_bits_ += std::uint64_t{len} * 8;

        while (len > 0) {
            std::size_t take = std::min(len, sizeof(block_) - used_);
            std::memcpy(block_ + used_, data, take);
            used_ += take;
            data += take;
            len -= take;

            if (used_ == sizeof(block_)) {
                compress();
                used_ = 0;
            }
        }
    }

    Sha1Digest finish()
    {
        std::uint64_t length_bits = length_bits_;
        static const std::uint8_t pad = 0x80;
        static const std::uint8_t zero[64] = {};

        update(&pad, 1);
        update(zero, (used_ <= 56 ? 56 : 120) - used_);

        std::uint8_t length[8];
        for (int i = 0; i < 8; i++) {
            length[i] = static_cast<std::uint8_t>(length_bits >> (56 - 8 * i));
        }
        update(length, sizeof(length));

        Sha1Digest digest;
        for (int i = 0; i < 20; i++) {
            digest[i] = static_cast<std::uint8_t>(state_[i / 4]
                                                  >> (24 - 8 * (i % 4)));
        }
        return digest;
    }

private:
    void compress()
    {
        std::uint32_t w[80];

        for (int i = 0; i < 16; i++) {
            w[i] = std::uint32_t{block_[4 * i]} << 24
                   | std::uint32_t{block_[4 * i + 1]} << 16
                   | std::uint32_t{block_[4 * i + 2]} << 8
                   | std::uint32_t{block_[4 * i + 3]};
        }
        for (int i = 16; i < 80; i++) {
            w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
        }

        std::uint32_t a = state_[0], b = state_[1], c = state_[2],
                      d = state_[3], e = state_[4];

        for (int i = 0; i < 80; i++) {
            std::uint32_t f, k;

            if (i < 20) {
                f = (b & c) | (~b & d);
                k = 0x5a827999;
            } else if (i < 40) {
                f = b ^ c ^ d;
                k = 0x6ed9eba1;
            } else if (i < 60) {
                f = (b & c) | (b & d) | (c & d);
                k = 0x8f1bbcdc;
            } else {
                f = b ^ c ^ d;
                k = 0xca62c1d6;
            }

            std::uint32_t t = rotl(a, 5) + f + e + k + w[i];
            e = d;
            d = c;
            c = rotl(b, 30);
            b = a;
            a = t;
        }

        state_[0] += a;
        state_[1] += b;
        state_[2] += c;
        state_[3] += d;
        state_[4] += e;
    }

    std::uint32_t state_[5] = {0x67452301, 0xefcdab89, 0x98badcfe,
                               0x10325476, 0xc3d2e1f0};
    std::uint8_t block_[64] = {};
    std::size_t used_ = 0;
    std::uint64_t length_bits_ = 0;
};

}  // namespace

Sha1Digest sha1(std::string_view data)
{
    Sha1 h;
    h.update(reinterpret_cast<const std::uint8_t *>(data.data()),
             data.size());
    return h.finish();
}

void sha1_hex(std::string_view data, char out[kSha1HexLength])
{
    static const char digits[] = "0123456789abcdef";
    Sha1Digest digest = sha1(data);

    for (std::size_t i = 0; i < digest.size(); i++) {
        out[2 * i] = digits[digest[i] >> 4];
        out[2 * i + 1] = digits[digest[i] & 0xf];
    }
}

}  // namespace ratelimit
