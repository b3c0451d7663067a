// RESP bytes made into Replies, for tests of decoders and of the commands
// sent: a reader of the protocol of its own, strict, so that src/ needs no
// client library.
#pragma once

#include <charconv>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "replies/reply.hpp"

namespace ratelimit {

// A reply, holding the bytes and arrays its Replies point into.
using ReplyPtr = std::shared_ptr<const Reply>;

class RespReader {
public:
    explicit RespReader(std::string_view bytes) : bytes_(bytes) {}

    // The reply starting at the first byte, and in *used the bytes it
    // took; null if they are not a complete reply or not valid RESP.
    ReplyPtr read(std::size_t *used)
    {
        auto tree = std::make_shared<Tree>();

        tree->bytes = bytes_;
        text_ = tree->bytes;
        tree_ = tree.get();

        if (!read_reply(&tree->root, 0)) {
            return nullptr;
        }

        *used = at_;
        return ReplyPtr(tree, &tree->root);
    }

private:
    struct Tree {
        std::string bytes;
        std::deque<std::vector<Reply>> arrays;
        Reply root;
    };

    // Deeper arrays are refused: random bytes cannot recurse without end.
    static constexpr int kMaxDepth = 8;

    // The line from at_ to its CRLF, at_ past it.
    bool line(std::string_view *out)
    {
        std::size_t end = text_.find("\r\n", at_);

        if (end == std::string_view::npos) {
            return false;
        }

        *out = text_.substr(at_, end - at_);
        at_ = end + 2;
        return true;
    }

    // A line holding a decimal number and nothing else.
    bool number(long long *out)
    {
        std::string_view digits;

        if (!line(&digits) || digits.empty()) {
            return false;
        }

        const char *end = digits.data() + digits.size();
        auto [ptr, ec] = std::from_chars(digits.data(), end, *out);
        return ec == std::errc() && ptr == end;
    }

    bool read_bulk(Reply *out)
    {
        long long len;

        if (!number(&len) || len < -1) {
            return false;
        }

        if (len == -1) {
            out->type = Reply::Type::kNil;
            return true;
        }

        auto n = static_cast<std::size_t>(len);

        if (text_.size() - at_ < n + 2 || text_.substr(at_ + n, 2) != "\r\n") {
            return false;
        }

        out->type = Reply::Type::kString;
        out->text = text_.substr(at_, n);
        at_ += n + 2;
        return true;
    }

    bool read_array(Reply *out, int depth)
    {
        long long count;

        if (!number(&count) || count < -1 || depth == kMaxDepth) {
            return false;
        }

        if (count == -1) {
            out->type = Reply::Type::kNil;
            return true;
        }

        // Each element takes 3 bytes at least ("+\r\n"): a count past the
        // bytes left is refused before anything is made for it.
        auto n = static_cast<std::size_t>(count);

        if (n > (text_.size() - at_) / 3) {
            return false;
        }

        std::vector<Reply> &elements = tree_->arrays.emplace_back(n);

        for (Reply &e : elements) {
            if (!read_reply(&e, depth + 1)) {
                return false;
            }
        }

        out->type = Reply::Type::kArray;
        out->element = elements.data();
        out->elements = n;
        return true;
    }

    bool read_reply(Reply *out, int depth)
    {
        if (at_ == text_.size()) {
            return false;
        }

        char mark = text_[at_++];

        switch (mark) {
        case '+':
        case '-':
            out->type = mark == '+' ? Reply::Type::kStatus
                                    : Reply::Type::kError;
            return line(&out->text);
        case ':':
            out->type = Reply::Type::kInteger;
            return number(&out->integer);
        case '$':
            return read_bulk(out);
        case '*':
            return read_array(out, depth);
        default:
            return false;
        }
    }

    std::string_view bytes_;
    std::string_view text_;  // the tree's copy of bytes_
    Tree *tree_ = nullptr;
    std::size_t at_ = 0;
};

// The reply `resp` starts with; null if it is not a complete reply or not
// valid RESP.  With `used`, the bytes it took.
inline ReplyPtr parse(std::string_view resp, std::size_t *used = nullptr)
{
    std::size_t taken;
    ReplyPtr reply = RespReader(resp).read(&taken);

    if (reply != nullptr && used != nullptr) {
        *used = taken;
    }

    return reply;
}

}  // namespace ratelimit
