#include "base/sha1.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

namespace ratelimit {

Sha1Digest sha1(std::string_view data)
{
    Sha1Digest digest;
    SHA1(reinterpret_cast<const unsigned char *>(data.data()), data.size(),
         digest.data());
    return digest;
}

char *digest_hex(const Sha1Digest &digest, std::size_t digits, char *out)
{
    static const char kDigits[] = "0123456789abcdef";

    for (std::size_t i = 0; i < digits; i++) {
        std::uint8_t byte = digest[i / 2];
        *out++ = kDigits[i % 2 == 0 ? byte >> 4 : byte & 0xf];
    }

    return out;
}

void sha1_hex(std::string_view data, char out[kSha1HexLength])
{
    digest_hex(sha1(data), kSha1HexLength, out);
}

Sha1Digest hmac_sha1(std::string_view key, std::string_view data)
{
    Sha1Digest digest;
    unsigned int len = 0;
    static const char kNoKey = 0;  // HMAC() wants a pointer for no key

    HMAC(EVP_sha1(), key.empty() ? &kNoKey : key.data(),
         static_cast<int>(key.size()),
         reinterpret_cast<const unsigned char *>(data.data()), data.size(),
         digest.data(), &len);
    return digest;
}

}  // namespace ratelimit
