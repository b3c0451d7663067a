#include "base/sha1.hpp"

#include <openssl/sha.h>

namespace ratelimit {

Sha1Digest sha1(std::string_view data)
{
    Sha1Digest digest;
    SHA1(reinterpret_cast<const unsigned char *>(data.data()), data.size(),
         digest.data());
    return digest;
}

void sha1_hex(std::string_view data, char out[kSha1HexLength])
{
    static const char kDigits[] = "0123456789abcdef";
    Sha1Digest digest = sha1(data);

    for (std::size_t i = 0; i < digest.size(); i++) {
        out[2 * i] = kDigits[digest[i] >> 4];
        out[2 * i + 1] = kDigits[digest[i] & 0xf];
    }
}

}  // namespace ratelimit
