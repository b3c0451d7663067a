#include "redis/reply_arena.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

#include <hiredis/hiredis.h>

namespace ratelimit {

namespace {

// What take() aligns every allocation to: a reply's integer and pointers.
constexpr std::size_t kAlign = alignof(Reply);

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

// A reply of `type`, in its parent array's place if it has one.
Reply *ReplyArena::create(const redisReadTask *task, Reply::Type type) noexcept
{
    Reply *r;

    if (task->parent != nullptr) {
        // create_array() made the element, empty, in memory of ours: not
        // a const object.
        auto *array = static_cast<const Reply *>(task->parent->obj);
        r = const_cast<Reply *>(array->element + task->idx);

    } else {
        auto *arena = static_cast<ReplyArena *>(task->privdata);
        void *p = arena->take(sizeof(Reply));

        if (p == nullptr) {
            return nullptr;
        }

        r = new (p) Reply{};
    }

    r->type = type;
    return r;
}

void *ReplyArena::create_string(const redisReadTask *task, char *str,
                                size_t len) noexcept
{
    auto *arena = static_cast<ReplyArena *>(task->privdata);
    auto *text = static_cast<char *>(arena->take(len));
    Reply::Type type = task->type == REDIS_REPLY_ERROR ? Reply::Type::kError
                       : task->type == REDIS_REPLY_STATUS
                           ? Reply::Type::kStatus
                           : Reply::Type::kString;
    Reply *r = text != nullptr ? create(task, type) : nullptr;

    if (r == nullptr) {
        return nullptr;
    }

    std::memcpy(text, str, len);
    r->text = {text, len};
    return r;
}

template <typename Count>
void *ReplyArena::create_array(const redisReadTask *task,
                               Count elements) noexcept
{
    auto *arena = static_cast<ReplyArena *>(task->privdata);
    auto n = static_cast<std::size_t>(elements);
    Reply *element = nullptr;

    if (n > 0) {
        element = static_cast<Reply *>(arena->take(n * sizeof(Reply)));

        if (element == nullptr) {
            return nullptr;
        }

        std::uninitialized_value_construct_n(element, n);
    }

    Reply *r = create(task, Reply::Type::kArray);

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
    Reply *r = create(task, Reply::Type::kInteger);

    if (r != nullptr) {
        r->integer = value;
    }

    return r;
}

void *ReplyArena::create_nil(const redisReadTask *task) noexcept
{
    return create(task, Reply::Type::kNil);
}

// hiredis frees a reply it gave up on (a protocol error): it goes with the
// arena's next reset().
void ReplyArena::free_object(void *) noexcept
{
}

}  // namespace ratelimit
