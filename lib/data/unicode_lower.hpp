// Python's str.lower() and str.isspace(), which torchtext's basic_english
// tokenizer lowercases and splits with. The tables are generated from Python
// itself (make_unicode_lower.py), so accented, Greek and Cyrillic letters
// lowercase as torchtext's do: U+0130 (İ) becomes "i" + U+0307, and a
// capital sigma ending a word becomes the final sigma U+03C2, as in Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace distlab::data {

struct LowerEntry {
  uint32_t code;
  uint32_t first;
  uint32_t second;  // 0: the lowercase is one code point
};

struct CodeRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

extern const LowerEntry kLowerTable[];
extern const std::size_t kLowerTableSize;
extern const CodeRange kCaseIgnorable[];  // Unicode Case_Ignorable
extern const std::size_t kCaseIgnorableSize;
extern const CodeRange kCased[];  // Cased and not Case_Ignorable
extern const std::size_t kCasedSize;

// str.lower() of a whole string (the final-sigma rule looks at neighbours).
std::u32string python_lower(const std::u32string& text);

// Python's str.isspace(), which is also what re's \s matches in a str
// pattern: ASCII whitespace, U+001C..U+001F, U+0085, U+00A0, U+1680,
// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_python_space(char32_t cp);

}  // namespace distlab::data
