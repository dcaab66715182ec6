// torchtext's basic_english tokenizer (torchtext/data/utils.py,
// _basic_english_normalize), rule for rule:
//
//   line.lower()                       (Python's Unicode lowercase)
//   '      -> " '  "                   (an apostrophe becomes its own token)
//   "      -> ""                       (double quotes vanish, joining neighbours)
//   .      -> " . "
//   <br /> -> " "
//   , ( ) ! ?  -> each its own token
//   ; :    -> " "                      (dropped)
//   \s+    -> " ", then split on whitespace (Unicode whitespace, as Python)
//
// Everything else stays inside tokens: "@-@", "<unk>", "don't" -> "don ' t",
// "3.5" -> "3 . 5", "e-mail" -> "e-mail".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace distlab::data {

// `line` must be UTF-8 (throws DataError otherwise). Tokens are UTF-8.
std::vector<std::string> basic_english_tokenize(std::string_view line);

}  // namespace distlab::data
