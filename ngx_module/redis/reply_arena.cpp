#include "redis/reply_arena.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace ratelimit {

namespace {

// What take() aligns every allocation to: a reply's integer and pointers.
constexpr std::size_t kAlign = alignof(redisReply);

static_assert(sizeof(void *) % kAlign == 0 && 3 * sizeof(void *) % kAlign
              == 0);

}  // namespace

ReplyArena::~ReplyArena()
{
    reset();
    ::operator delete(first_, std::nothrow);
}

redisReader *ReplyArena::create_reader() noexcept
{
    // Only RESP2's kinds: RESP3's (doubles, booleans) are never asked for.
    static redisReplyObjectFunctions functions = [] {
        redisReplyObjectFunctions f{};
        f.createString = create_string;
        f.createArray = create_array;
        f.createInteger = create_integer;
        f.createNil = create_nil;
        f.freeObject = free_object;
        return f;
    }();

    redisReader *reader = redisReaderCreateWithFunctions(&functions);

    if (reader != nullptr) {
        reader->privdata = this;
    }

    return reader;
}

void ReplyArena::reset() noexcept
{
    if (first_ == nullptr) {
        return;
    }

    for (Block *b = first_->next, *next; b != nullptr; b = next) {
        next = b->next;
        ::operator delete(b, std::nothrow);
    }

    first_->next = nullptr;
    first_->used = 0;
    current_ = first_;
}

ReplyArena::Block *ReplyArena::add_block(std::size_t size) noexcept
{
    auto *b = static_cast<Block *>(::operator new(sizeof(Block) + size,
                                                  std::nothrow));

    if (b != nullptr) {
        *b = {nullptr, size, 0};
    }

    return b;
}

void *ReplyArena::take(std::size_t size) noexcept
{
    size = (size + kAlign - 1) & ~(kAlign - 1);

    if (first_ == nullptr) {
        first_ = current_ = add_block(kBlockSize);

        if (first_ == nullptr) {
            return nullptr;
        }
    }

    if (current_->size - current_->used < size) {
        Block *b = add_block(std::max(kBlockSize, size));

        if (b == nullptr) {
            return nullptr;
        }

        current_->next = b;
        current_ = b;
    }

    void *p = reinterpret_cast<char *>(current_ + 1) + current_->used;
    current_->used += size;
    return p;
}

// A reply of `type`, zeroed, in its parent array's place if it has one.
redisReply *ReplyArena::create(const redisReadTask *task, int type) noexcept
{
    auto *arena = static_cast<ReplyArena *>(task->privdata);
    auto *r = static_cast<redisReply *>(arena->take(sizeof(redisReply)));

    if (r == nullptr) {
        return nullptr;
    }

    std::memset(r, 0, sizeof(redisReply));
    r->type = type;

    if (task->parent != nullptr) {
        static_cast<redisReply *>(task->parent->obj)->element[task->idx] = r;
    }

    return r;
}

void *ReplyArena::create_string(const redisReadTask *task, char *str,
                                size_t len) noexcept
{
    auto *arena = static_cast<ReplyArena *>(task->privdata);
    auto *text = static_cast<char *>(arena->take(len + 1));
    redisReply *r = text != nullptr ? create(task, task->type) : nullptr;

    if (r == nullptr) {
        return nullptr;
    }

    std::memcpy(text, str, len);
    text[len] = '\0';
    r->str = text;
    r->len = len;
    return r;
}

template <typename Count>
void *ReplyArena::create_array(const redisReadTask *task,
                               Count elements) noexcept
{
    auto *arena = static_cast<ReplyArena *>(task->privdata);
    auto n = static_cast<std::size_t>(elements);
    redisReply **element = nullptr;

    if (n > 0) {
        element = static_cast<redisReply **>(
            arena->take(n * sizeof(redisReply *)));

        if (element == nullptr) {
            return nullptr;
        }

        std::memset(element, 0, n * sizeof(redisReply *));
    }

    redisReply *r = create(task, REDIS_REPLY_ARRAY);

    if (r == nullptr) {
        return nullptr;
    }

    r->element = element;
    r->elements = n;
    return r;
}

void *ReplyArena::create_integer(const redisReadTask *task,
                                 long long value) noexcept
{
    redisReply *r = create(task, REDIS_REPLY_INTEGER);

    if (r != nullptr) {
        r->integer = value;
    }

    return r;
}

void *ReplyArena::create_nil(const redisReadTask *task) noexcept
{
    return create(task, REDIS_REPLY_NIL);
}

// hiredis frees a reply it gave up on (a protocol error): it goes with the
// arena's next reset().
void ReplyArena::free_object(void *) noexcept
{
}

}  // namespace ratelimit
