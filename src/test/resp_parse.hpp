// RESP bytes made into the reply hiredis's reader makes of them, for tests
// of decoders.
#pragma once

#include <memory>
#include <string_view>

#include <hiredis/hiredis.h>

namespace ratelimit {

struct ReplyDeleter {
    void operator()(redisReply *r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// Null if the bytes are not a complete reply or not valid RESP.
inline ReplyPtr parse(std::string_view resp)
{
    redisReader *rd = redisReaderCreate();
    void *reply = nullptr;

    if (redisReaderFeed(rd, resp.data(), resp.size()) != REDIS_OK
        || redisReaderGetReply(rd, &reply) != REDIS_OK)
    {
        reply = nullptr;
    }
    redisReaderFree(rd);
    return ReplyPtr(static_cast<redisReply *>(reply));
}

}  // namespace ratelimit
