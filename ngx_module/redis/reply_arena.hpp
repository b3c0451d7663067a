// The replies of one connection's reader, made in memory it reuses, as
// plain values (replies/reply.hpp).  hiredis's own reader allocates each
// element of a reply and frees each: a batch's reply holds four integers
// per request, and those allocations were the largest cost a limited
// request added to the worker (callgrind: some 1,900 of its instructions).
// Here a reply takes its elements from a block kept from one reply to the
// next, an array's elements in a row, and goes all at once.
#pragma once

#include <cstddef>

#include "replies/reply.hpp"

// hiredis's types, only declared: the files that include this header (the
// connection's, and through it most of the shell) never see hiredis's.
struct redisReadTask;
struct redisReader;

namespace ratelimit {

class ReplyArena {
public:
    ReplyArena() = default;
    ReplyArena(const ReplyArena &) = delete;
    ReplyArena &operator=(const ReplyArena &) = delete;
    ~ReplyArena();

    // A reader (redisReaderFree() frees it) whose replies are Replies
    // made here: never freeReplyObject() them; reset() ends them.  nullptr
    // on no memory.
    redisReader *create_reader() noexcept;

    // Every reply made so far is gone.  Only between two
    // redisReaderGetReply() calls, once the reply last returned is no
    // longer used: a reply still being read lives here too.
    void reset() noexcept;

private:
    struct Block {
        Block *next;
        std::size_t size;  // bytes after the header
        std::size_t used;
    };

    // The block kept: a 64-request batch's reply (257 Replies, some 12 KB)
    // fits in it.
    // A larger reply takes more blocks, freed by the next reset().
    static constexpr std::size_t kBlockSize = 16384;

    static void *create_string(const redisReadTask *task, char *str,
                               size_t len) noexcept;
    // Count: the element count's type, int or size_t by hiredis's version.
    template <typename Count>
    static void *create_array(const redisReadTask *task,
                              Count elements) noexcept;
    static void *create_integer(const redisReadTask *task,
                                long long value) noexcept;
    static void *create_nil(const redisReadTask *task) noexcept;
    static void free_object(void *reply) noexcept;
    static Reply *create(const redisReadTask *task,
                        Reply::Type type) noexcept;

    void *take(std::size_t size) noexcept;
    Block *add_block(std::size_t size) noexcept;

    Block *first_ = nullptr;    // kBlockSize bytes, kept
    Block *current_ = nullptr;  // where take() allocates
};

}  // namespace ratelimit
