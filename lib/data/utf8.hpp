// UTF-8 checking, decoding and encoding, strict as Python's decoder is:
// overlong forms, surrogates and code points past U+10FFFF are refused.
// WikiText files are read as UTF-8 by torchtext; a file that Python would
// refuse is refused here too, with the offset of the first bad byte.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace distlab::data {

// Byte offset of the first byte that does not start a valid UTF-8 sequence,
// or nullopt when all of `bytes` is valid UTF-8.
std::optional<std::size_t> first_invalid_utf8(std::string_view bytes);

// Decodes the code point starting at bytes[pos] and moves pos past it.
// Throws DataError if the sequence there is not valid UTF-8.
char32_t next_code_point(std::string_view bytes, std::size_t& pos);

void append_utf8(char32_t code_point, std::string& out);

}  // namespace distlab::data
