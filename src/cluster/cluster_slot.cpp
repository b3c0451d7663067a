#include "cluster/cluster_slot.hpp"

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

namespace {

bool integer(const redisReply *r, long long lo, long long hi, long long *out)
{
    if (r == nullptr || r->type != REDIS_REPLY_INTEGER || r->integer < lo
        || r->integer > hi)
    {
        return false;
    }

    *out = r->integer;
    return true;
}

// [host, port, ...]: the node's address.
bool node_address(const redisReply *r, std::string_view *host, int *port)
{
    long long p;

    if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements < 2
        || r->element[0]->type != REDIS_REPLY_STRING
        || !integer(r->element[1], 1, 65535, &p))
    {
        return false;
    }

    *host = {r->element[0]->str, r->element[0]->len};
    *port = static_cast<int>(p);
    return true;
}

}  // namespace

std::uint16_t SlotMap::find(std::string_view host, int port) const noexcept
{
    for (std::size_t i = 0; i < nodes_.size(); i++) {
        if (nodes_[i].port == port && nodes_[i].host == host) {
            return static_cast<std::uint16_t>(i);
        }
    }

    return kNoNode;
}

bool SlotMap::load(const redisReply *reply) noexcept
{
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY) {
        return false;
    }

    try {
        SlotMap map;
        map.slots_.assign(kClusterSlots, kNoNode);

        for (std::size_t i = 0; i < reply->elements; i++) {
            const redisReply *range = reply->element[i];
            long long first, last;
            std::string_view host;
            int port;

            if (range->type != REDIS_REPLY_ARRAY || range->elements < 3
                || !integer(range->element[0], 0, kClusterSlots - 1, &first)
                || !integer(range->element[1], first, kClusterSlots - 1,
                            &last)
                || !node_address(range->element[2], &host, &port))
            {
                return false;
            }

            std::uint16_t node = map.find(host, port);

            if (node == kNoNode) {
                node = static_cast<std::uint16_t>(map.nodes_.size());
                map.nodes_.push_back({std::string(host), port});
            }

            for (long long s = first; s <= last; s++) {
                map.slots_[static_cast<std::size_t>(s)] = node;
            }
        }

        *this = std::move(map);
        return true;

    } catch (...) {
        return false;
    }
}

bool SlotMap::move(std::uint16_t slot, std::string_view host,
                   int port) noexcept
{
    try {
        std::uint16_t node = find(host, port);

        if (node == kNoNode) {
            node = static_cast<std::uint16_t>(nodes_.size());
            nodes_.push_back({std::string(host), port});
        }

        if (slots_.empty()) {
            slots_.assign(kClusterSlots, kNoNode);
        }

        slots_[slot % kClusterSlots] = node;
        return true;

    } catch (...) {
        return false;
    }
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
