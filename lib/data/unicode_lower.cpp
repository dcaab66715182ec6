#include "data/unicode_lower.hpp"

#include <algorithm>

namespace distlab::data {
namespace {

constexpr char32_t kCapitalSigma = 0x03A3;
constexpr char32_t kSmallSigma = 0x03C3;
constexpr char32_t kFinalSigma = 0x03C2;

bool in_ranges(const CodeRange* ranges, std::size_t n, char32_t cp) {
  const CodeRange* end = ranges + n;
  const CodeRange* it = std::upper_bound(ranges, end, static_cast<uint32_t>(cp),
                                         [](uint32_t c, const CodeRange& r) { return c < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

bool is_ignorable(char32_t cp) { return in_ranges(kCaseIgnorable, kCaseIgnorableSize, cp); }
bool is_cased(char32_t cp) { return in_ranges(kCased, kCasedSize, cp); }

// CPython's handle_capital_sigma: final when a cased letter comes before and
// none after, case-ignorable characters (apostrophes, accents...) skipped.
bool is_final_sigma(const std::u32string& text, std::size_t i) {
  std::size_t j = i;
  while (j > 0 && is_ignorable(text[j - 1])) --j;
  if (j == 0 || !is_cased(text[j - 1])) return false;
  j = i + 1;
  while (j < text.size() && is_ignorable(text[j])) ++j;
  return j == text.size() || !is_cased(text[j]);
}

void append_lower(char32_t cp, std::u32string& out) {
  if (cp < 0x80) {
    out.push_back(cp >= U'A' && cp <= U'Z' ? cp + 32 : cp);
    return;
  }
  const LowerEntry* end = kLowerTable + kLowerTableSize;
  const LowerEntry* it = std::lower_bound(kLowerTable, end, static_cast<uint32_t>(cp),
                                          [](const LowerEntry& e, uint32_t c) { return e.code < c; });
  if (it == end || it->code != cp) {
    out.push_back(cp);
    return;
  }
  out.push_back(it->first);
  if (it->second != 0) out.push_back(it->second);
}

}  // namespace

std::u32string python_lower(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == kCapitalSigma) {
      out.push_back(is_final_sigma(text, i) ? kFinalSigma : kSmallSigma);
    } else {
      append_lower(text[i], out);
    }
  }
  return out;
}

bool is_python_space(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace distlab::data
