#include "data/tokenizer.hpp"

#include <algorithm>

#include "data/unicode_lower.hpp"
#include "data/utf8.hpp"

namespace distlab::data {
namespace {

// Characters that torchtext surrounds with spaces, so they become tokens.
bool is_own_token(char32_t c) {
  return c == U'\'' || c == U'.' || c == U',' || c == U'(' || c == U')' || c == U'!' || c == U'?';
}

bool starts_br(const std::u32string& text, std::size_t i) {
  static const std::u32string kBr = U"<br />";
  return text.compare(i, kBr.size(), kBr) == 0;
}

}  // namespace

std::vector<std::string> basic_english_tokenize(std::string_view line) {
  // Pass 1: lowercase the whole line, then drop double quotes. Dropping
  // comes after lowercasing (a quote can end a word for the final-sigma
  // rule) and before "<br />" is looked for (`<br "/>` is a break).
  std::u32string decoded;
  decoded.reserve(line.size());
  for (std::size_t pos = 0; pos < line.size();) decoded.push_back(next_code_point(line, pos));
  std::u32string text = python_lower(decoded);
  text.erase(std::remove(text.begin(), text.end(), U'"'), text.end());

  // Pass 2: the remaining rules only insert or remove separators, so one
  // scan that ends a token at each separator gives torchtext's split().
  std::vector<std::string> tokens;
  std::string current;
  const auto flush = [&] {
    if (!current.empty()) tokens.push_back(std::move(current));
    current.clear();
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c == U'<' && starts_br(text, i)) {
      flush();
      i += 5;
    } else if (is_own_token(c)) {
      flush();
      append_utf8(c, current);
      flush();
    } else if (c == U';' || c == U':' || is_python_space(c)) {
      flush();
    } else {
      append_utf8(c, current);
    }
  }
  flush();
  return tokens;
}

}  // namespace distlab::data
