#include "cluster/cluster_slot.hpp"

#include <algorithm>
#include <charconv>

namespace ratelimit {

std::uint16_t crc16_xmodem(std::string_view data)
{
    std::uint16_t crc = 0;

    for (char c : data) {
        crc ^= static_cast<std::uint16_t>(static_cast<unsigned char>(c) << 8);

        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                                 : static_cast<std::uint16_t>(crc << 1);
        }
    }

    return crc;
}

std::uint16_t key_slot(std::string_view key)
{
    std::size_t open = key.find('{');

    if (open != std::string_view::npos) {
        std::size_t close = key.find('}', open + 1);

        if (close != std::string_view::npos && close > open + 1) {
            key = key.substr(open + 1, close - open - 1);
        }
    }

    return crc16_xmodem(key) % kClusterSlots;
}

std::size_t write_slot_tag(std::uint16_t slot, char *out) noexcept
{
    // Each slot's number, found by trying 0, 1, 2... until every slot has
    // one; static, as a CRC table is: the same in every process.
    static std::uint32_t tags[kClusterSlots];
    static bool found = false;
    char digits[kSlotTagMaxSize];

    if (!found) {
        bool seen[kClusterSlots] = {};
        std::size_t left = kClusterSlots;

        for (std::uint32_t n = 0; left > 0; n++) {
            char *end = std::to_chars(digits, digits + sizeof(digits), n).ptr;
            std::uint16_t s = crc16_xmodem({digits, std::size_t(end - digits)})
                              % kClusterSlots;

            if (!seen[s]) {
                seen[s] = true;
                tags[s] = n;
                left--;
            }
        }

        found = true;
    }

    return std::size_t(std::to_chars(out, out + kSlotTagMaxSize,
                                     tags[slot % kClusterSlots]).ptr
                       - out);
}

namespace {

bool integer(const Reply &r, long long lo, long long hi, long long *out)
{
    if (r.type != Reply::Type::kInteger || r.integer < lo || r.integer > hi) {
        return false;
    }

    *out = r.integer;
    return true;
}

// [host, port, ...]: the node's address.
bool node_address(const Reply &r, std::string_view *host, int *port)
{
    long long p;

    if (r.type != Reply::Type::kArray || r.elements < 2
        || r.element[0].type != Reply::Type::kString
        || !integer(r.element[1], 1, 65535, &p))
    {
        return false;
    }

    *host = r.element[0].text;
    *port = static_cast<int>(p);
    return true;
}

// Nodes in the order of by_address_: by port, then host.
bool before(const SlotMap::Node &n, std::string_view host, int port)
{
    return n.port != port ? n.port < port : std::string_view(n.host) < host;
}

}  // namespace

// Where host:port is in by_address_, or would be.
std::vector<std::uint16_t>::const_iterator
SlotMap::position(std::string_view host, int port) const noexcept
{
    return std::partition_point(
        by_address_.begin(), by_address_.end(),
        [&](std::uint16_t i) { return before(nodes_[i], host, port); });
}

std::uint16_t SlotMap::find(std::string_view host, int port) const noexcept
{
    auto at = position(host, port);

    return at != by_address_.end() && nodes_[*at].port == port
                   && nodes_[*at].host == host
               ? *at
               : kNoNode;
}

std::uint16_t SlotMap::add(std::string_view host, int port)
{
    auto at = position(host, port);
    auto node = static_cast<std::uint16_t>(nodes_.size());

    nodes_.push_back({std::string(host), port});
    by_address_.insert(at, node);
    return node;
}

bool SlotMap::load(const Reply *reply, std::string *why) noexcept
{
    std::string wrong;

    try {
        SlotMap map;

        if (map.fill(reply, &wrong)) {
            *this = std::move(map);
            return true;
        }

    } catch (...) {
        wrong.clear();
    }

    if (why != nullptr) {
        *why = std::move(wrong);

        if (why->empty()) {
            why->assign("no memory");  // short: no allocation
        }
    }

    return false;
}

// The reply into this empty map: false, with what was wrong in *why, past
// the bounds (each checked before the work it bounds) or if not of the
// shape of CLUSTER SLOTS.
bool SlotMap::fill(const Reply *reply, std::string *why)
{
    if (reply == nullptr || reply->type != Reply::Type::kArray) {
        if (reply != nullptr && reply->type == Reply::Type::kError) {
            why->assign(reply->text);
        } else {
            why->assign("not an array");
        }
        return false;
    }

    if (reply->elements > kMaxRanges) {
        *why = std::to_string(reply->elements) + " ranges, more than "
               + std::to_string(kMaxRanges);
        return false;
    }

    slots_.assign(kClusterSlots, kNoNode);

    for (std::size_t i = 0; i < reply->elements; i++) {
        const Reply &range = reply->element[i];
        long long first, last;
        std::string_view host;
        int port;

        if (range.type != Reply::Type::kArray || range.elements < 3
            || !integer(range.element[0], 0, kClusterSlots - 1, &first)
            || !integer(range.element[1], first, kClusterSlots - 1, &last)
            || !node_address(range.element[2], &host, &port))
        {
            *why = "range " + std::to_string(i + 1)
                   + " is not [first, last, [host, port, ...], ...]";
            return false;
        }

        if (range.elements - 2 > kMaxNodes) {
            *why = "range " + std::to_string(i + 1) + " lists "
                   + std::to_string(range.elements - 2)
                   + " nodes, more than " + std::to_string(kMaxNodes);
            return false;
        }

        if (host.size() > kMaxHostLength) {
            *why = "a host of " + std::to_string(host.size())
                   + " bytes, more than " + std::to_string(kMaxHostLength);
            return false;
        }

        std::uint16_t node = find(host, port);

        if (node == kNoNode) {
            if (nodes_.size() == kMaxNodes) {
                *why = "more than " + std::to_string(kMaxNodes) + " masters";
                return false;
            }

            node = add(host, port);
        }

        // Each slot once: the ranges' slots add up to 16384 at most.
        for (long long s = first; s <= last; s++) {
            std::uint16_t &owner = slots_[static_cast<std::size_t>(s)];

            if (owner != kNoNode) {
                *why = "slot " + std::to_string(s) + " is in two ranges";
                return false;
            }

            owner = node;
        }
    }

    return true;
}

bool SlotMap::move(std::uint16_t slot, std::string_view host,
                   int port) noexcept
{
    std::uint16_t node = find(host, port);

    if (node == kNoNode) {
        return false;
    }

    slots_[slot % kClusterSlots] = node;
    return true;
}

Redirect parse_redirect(std::string_view error) noexcept
{
    Redirect r;
    std::string_view rest;

    if (error.substr(0, 6) == "MOVED ") {
        r.kind = Redirect::Kind::kMoved;
        rest = error.substr(6);
    } else if (error.substr(0, 4) == "ASK ") {
        r.kind = Redirect::Kind::kAsk;
        rest = error.substr(4);
    } else {
        return {};
    }

    std::size_t space = rest.find(' ');
    std::size_t colon = rest.rfind(':');
    unsigned slot = 0;
    int port = 0;

    if (space == std::string_view::npos || colon == std::string_view::npos
        || colon < space
        || std::from_chars(rest.data(), rest.data() + space, slot).ec
           != std::errc()
        || slot >= kClusterSlots
        || std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(),
                           port).ec != std::errc()
        || port < 1 || port > 65535)
    {
        return {};
    }

    r.slot = static_cast<std::uint16_t>(slot);
    r.host = rest.substr(space + 1, colon - space - 1);
    r.port = port;
    return r;
}

}  // namespace ratelimit
