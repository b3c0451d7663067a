// Redis Cluster's arithmetic: which of the 16384 hash slots a key is in, and
// which master serves each slot, as CLUSTER SLOTS tells it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "replies/reply.hpp"

namespace ratelimit {

constexpr std::uint16_t kClusterSlots = 16384;

// CRC16-CCITT (XMODEM), as the cluster specification defines it.
std::uint16_t crc16_xmodem(std::string_view data);

// The slot of `key`: of the part between its first '{' and the next '}' if
// that part is not empty, else of the whole key.
std::uint16_t key_slot(std::string_view key);

// A hash tag in `slot`: the smallest decimal number whose CRC16 falls in
// it, so that a key of a zone's own can be named in any slot (a zone's
// marker, keys/subject_key.hpp).  Writes at most kSlotTagMaxSize bytes
// into out; returns how many.  The first call works out every slot's
// (about 160,000 CRC16s of at most 6 digits).
constexpr std::size_t kSlotTagMaxSize = 10;
std::size_t write_slot_tag(std::uint16_t slot, char *out) noexcept;

class SlotMap {
public:
    static constexpr std::uint16_t kNoNode = 0xffff;

    // What load() takes, at most, so that a broken or hostile node's reply
    // costs a worker a bounded loop and a bounded map.  Ranges: no slot is
    // in two of them and each has one at least, so 16384.  Nodes (masters,
    // and the nodes a range lists): Redis Cluster is designed for up to
    // 1000 nodes (its specification); each master costs every worker a
    // connection.  Host: a DNS name is at most 253 bytes, an IP address
    // fewer.
    static constexpr std::size_t kMaxRanges = kClusterSlots;
    static constexpr std::size_t kMaxNodes = 1000;
    static constexpr std::size_t kMaxHostLength = 255;

    struct Node {
        std::string host;  // as the cluster announces it; may be empty
        int port;
    };

    // Fills the map from a CLUSTER SLOTS reply: each range's first node
    // is its master.  False, with the map as it was and what was wrong in
    // *why (if given), if the reply is an error, not of that shape, past
    // the bounds above, or on no memory.
    bool load(const Reply *reply, std::string *why = nullptr) noexcept;

    // The master of `slot`, an index into nodes(), or kNoNode.
    std::uint16_t node_of(std::uint16_t slot) const noexcept
    {
        return slots_.empty() ? kNoNode : slots_[slot];
    }

    // MOVED: `slot` is now served by host:port, a node of the map.  False,
    // with the map as it was, if the map has no such node: a MOVED to a
    // node it does not know is not taken on trust (the map is asked for
    // again instead), so that nothing but CLUSTER SLOTS adds a node.
    bool move(std::uint16_t slot, std::string_view host, int port) noexcept;

    const std::vector<Node> &nodes() const noexcept { return nodes_; }

    // The node at host:port, or kNoNode; a binary search.
    std::uint16_t find(std::string_view host, int port) const noexcept;

private:
    bool fill(const Reply *reply, std::string *why);
    std::vector<std::uint16_t>::const_iterator
    position(std::string_view host, int port) const noexcept;
    std::uint16_t add(std::string_view host, int port);

    std::vector<Node> nodes_;
    std::vector<std::uint16_t> by_address_;  // nodes_' indexes, sorted
    std::vector<std::uint16_t> slots_;  // kClusterSlots entries once loaded
};

// "MOVED 3999 127.0.0.1:6381" and "ASK 3999 127.0.0.1:6381", parsed.
struct Redirect {
    enum class Kind { kNone, kMoved, kAsk };

    Kind kind = Kind::kNone;
    std::uint16_t slot = 0;
    std::string_view host;  // empty: the host of the node that answered
    int port = 0;
};

Redirect parse_redirect(std::string_view error) noexcept;

}  // namespace ratelimit
