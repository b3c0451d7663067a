// Numbers as the window script's Lua (5.1, Redis's) sees them, so that the
// command decides a hash an operator edited by hand exactly as the script
// does: a field is a number if Lua's tonumber() takes it, numbers are
// doubles, and string.format('%d') and a number in a script's reply both
// truncate to a 64-bit integer.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ratelimit::lua {

// tonumber() of a string of `len` bytes: strtod's syntax (leading spaces,
// sign, decimals, exponent, hexadecimal, inf, nan), then only spaces.  As
// in Lua, the bytes are read as a C string: a NUL ends them.
bool to_number(const char *bytes, std::size_t len, double *out) noexcept;

// The integer string.format('%d', x) prints and a reply carries: x
// truncated toward zero; NaN and values out of range give INT64_MIN, as
// the x86-64 conversion Redis's Lua is built with does.
std::int64_t to_integer(double x) noexcept;

// The decimal text of to_integer(x) into `out` (at least kMaxText bytes),
// NUL-terminated; returns its length.
constexpr std::size_t kMaxText = 21;
std::size_t format(double x, char *out) noexcept;

}  // namespace ratelimit::lua
