// Redis Cluster's arithmetic: which of the 16384 hash slots a key is in, and
// which master serves each slot, as CLUSTER SLOTS tells it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <hiredis/hiredis.h>

namespace ratelimit {

constexpr std::uint16_t kClusterSlots = 16384;

// CRC16-CCITT (XMODEM), as the cluster specification defines it.
std::uint16_t crc16_xmodem(std::string_view data);

// The slot of `key`: of the part between its first '{' and the next '}' if
// that part is not empty, else of the whole key.
std::uint16_t key_slot(std::string_view key);

class SlotMap {
public:
    static constexpr std::uint16_t kNoNode = 0xffff;

    struct Node {
        std::string host;  // as the cluster announces it; may be empty
        int port;
    };

    // Fills the map from a CLUSTER SLOTS reply: each range's first node
    // is its master.  False, with the map as it was, if the reply is not
    // of that shape, or on no memory.
    bool load(const redisReply *reply) noexcept;

    // The master of `slot`, an index into nodes(), or kNoNode.
    std::uint16_t node_of(std::uint16_t slot) const noexcept
    {
        return slots_.empty() ? kNoNode : slots_[slot];
    }

    // MOVED: `slot` is now served by host:port (added if new).  False on
    // no memory.
    bool move(std::uint16_t slot, std::string_view host, int port) noexcept;

    const std::vector<Node> &nodes() const noexcept { return nodes_; }

    // The node at host:port, or kNoNode.
    std::uint16_t find(std::string_view host, int port) const noexcept;

private:
    std::vector<Node> nodes_;
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
