// What every directive's parameters are read with: NAME=VALUE tokens
// against a table, nginx's times and integers, and the operator-facing
// error texts.  No nginx here: the nginx side turns the results into its
// structs and reports the errors (nginx adds " in FILE:LINE").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ratelimit {

// A directive's arguments after its name, as nginx read them.
using ParamTokens = std::vector<std::string_view>;

// Why a directive is refused: the text nginx prints after "[emerg] ", and
// the token it is about, so that the nginx side reports what it finds
// itself on earlier tokens first (an address it cannot read, a zone name
// taken), as a single pass over the tokens would.  token == tokens.size():
// the directive as a whole.
struct ParamError {
    std::string text;
    std::size_t token;
};

// A parser's answer: the values, or why there are none (then `params`
// holds what was read before the error).
template <typename Params>
struct ParamResult {
    Params params;
    std::optional<ParamError> error;
};

// TIME as nginx's ngx_parse_time() reads one in milliseconds: "50ms",
// "2s", "1h", "1m30s", a bare number being seconds; weeks at most (no
// years or months), each unit once and largest first.  Nothing for 0, or
// above 2^63 - 1 ms.
std::optional<std::uint64_t> parse_time_ms(std::string_view text);

// A decimal integer as nginx's ngx_atoi() reads one: digits only, at
// least one, at most 2^63 - 1.
std::optional<std::int64_t> parse_nginx_int(std::string_view text);

// `"TEXT"`, as error texts quote what the operator wrote.
std::string quoted(std::string_view text);

std::string invalid_param_text(std::string_view token);
std::string duplicate_param_text(std::string_view token);

// One NAME=VALUE parameter of a directive.
struct NamedParam {
    std::string_view name;   // before the '=': "key"
    unsigned forms;          // a mask of the forms of the directive that
                             // take it (a rate or a concurrency zone)
    // Checked as it is read; nullptr: checked later, by the caller, so
    // that errors come in the order the caller wants.
    bool (*valid)(std::string_view value);
};

// Reads `token`, NAME=VALUE, into values[i] for the table[i] of that name
// that `form` takes.  The error text if there is none, if it was given
// before, or if its check refuses it.  `values` has `size` elements, as
// `table`.
std::optional<std::string> take_named_param(const NamedParam *table,
                                            std::size_t size, unsigned form,
                                            std::string_view token,
                                            std::optional<std::string_view>
                                                *values);

}  // namespace ratelimit
