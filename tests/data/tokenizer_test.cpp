// The basic_english tokenizer against torchtext's own output on tricky
// lines, and against expectations worked out by hand from torchtext's rules.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "data/errors.hpp"
#include "data/tokenizer.hpp"
#include "data/utf8.hpp"
#include "reference.hpp"
#include "support/required_tool.hpp"

namespace distlab::data {
namespace {

using Tokens = std::vector<std::string>;

// Lines chosen to exercise every rule and its order.
const std::vector<std::string> kTrickyLines = {
    "Hello, World! It's a \"test\": yes; <br />no. (x)",
    " = Valkyria Chronicles III = ",
    " The game 's 1 @,@ 000 copies sold @.@ 5 % , a real @-@ time <unk> system . ",
    "<BR />Upper-case break, <br \"/> a break made by dropping a quote, <br/> not one",
    "<br  /> two spaces, <br /><br />x, a<br />b",
    "don't!!! ... ?? (nested (parens)) a,b,c 3.14 Mr.Darcy's",
    "\u00C9COLE Stra\u00DFe \u0130stanbul \u03A3\u038A\u03A3\u03A5\u03A6\u039F\u03A3 \u041A\u0418\u0420\u0418\u041B\u041B\u0418\u0426\u0410",
    "tab\there nbsp\u00A0em\u2003ideographic\u3000space line\u2028sep nel\u0085x fs\x1c" "x vt\x0b" "x",
    "emoji \U0001F600 and \u4E2D\u6587, mixed;semi:colon",
    "",
    "   \t  ",
    "--dash-- _italic_ `back' ``quotes'' [brackets] {braces} <tag> a/b",
    "\u201Ccurly\u201D \u2018single\u2019 \u00AB guillemets \u00BB",
    "\u212A Kelvin sign, \u2160 roman numeral, \u1E9E capital sharp s, \U00010400 deseret",
    // Final sigma: before a space, quote, apostrophe, digit, accent; alone; inside a word.
    "\u039F\u0394\u039F\u03A3 \u03A3 \u0391\u03A3\" x \u0391\u03A3' \u0391\u03A3\u0301 \u0391\u03A31 \u0391\u03A3\u0391",
    "\u0391'\u03A3 \u0391.\u03A3.\u0391 \u00AA\u03A3 \u02B0\u03A3 \u0391\u03A3\u02B0\u0391",
};

TEST(Tokenizer, MatchesTorchtextOnTrickyLines) {
  const auto why = testing_ref::torchtext_unavailable();
  DISTLAB_SKIP_OR_FAIL_WITHOUT(!why, *why);
  const nlohmann::json expected = testing_ref::run_torchtext("tokenize", kTrickyLines);
  ASSERT_EQ(expected.size(), kTrickyLines.size());
  for (std::size_t i = 0; i < kTrickyLines.size(); ++i) {
    EXPECT_EQ(basic_english_tokenize(kTrickyLines[i]), expected[i].get<Tokens>()) << "line " << i << ": "
                                                                                  << kTrickyLines[i];
  }
}

// Random lines over the characters that matter to some rule: every one of
// torchtext's patterns, Unicode spaces, capital sigma with cased and
// case-ignorable neighbours, letters whose lowercase is special.
std::vector<std::string> random_lines(int count, uint32_t seed) {
  const std::vector<std::string> pieces = {
      "a", "Z", "q", "7", " ", " ", "\t", "'", "\"", ".", ",", "(", ")", "!", "?", ";", ":", "<br />",
      "<BR />", "<br", "/>", "@-@", "@,@", "<unk>", "-", "\u00A0", "\u2003", "\u0085", "\x1c", "\u03A3",
      "\u03A3", "\u0391", "\u02B0", "\u00AA", "\u0301", "\u2019", "\u00B7", "\u0130", "\u00C9", "\u00DF",
      "\u1E9E", "\u212A", "\u4E2D", "\U0001F600", "\U00010400", "\u00AD", "\u200D"};
  std::mt19937 rng(seed);
  std::vector<std::string> lines;
  for (int i = 0; i < count; ++i) {
    std::string line;
    const int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) line += pieces[rng() % pieces.size()];
    lines.push_back(line);
  }
  return lines;
}

TEST(Tokenizer, MatchesTorchtextOnRandomLines) {
  const auto why = testing_ref::torchtext_unavailable();
  DISTLAB_SKIP_OR_FAIL_WITHOUT(!why, *why);
  const std::vector<std::string> lines = random_lines(2000, 12345);
  const nlohmann::json expected = testing_ref::run_torchtext("tokenize", lines);
  ASSERT_EQ(expected.size(), lines.size());
  int wrong = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (basic_english_tokenize(lines[i]) != expected[i].get<Tokens>() && ++wrong <= 5) {
      ADD_FAILURE() << "line " << i << ": '" << lines[i] << "'";
    }
  }
  EXPECT_EQ(wrong, 0) << "of " << lines.size() << " lines";
}

TEST(Tokenizer, HandWrittenExpectations) {
  // Lowercased; ',' '!' '.' '(' ')' become tokens; '"' vanishes; ';' ':' and <br /> separate.
  EXPECT_EQ(basic_english_tokenize("Hello, World! It's a \"test\": yes; <br />no. (x)"),
            (Tokens{"hello", ",", "world", "!", "it", "'", "s", "a", "test", "yes", "no", ".", "(", "x", ")"}));
  // WikiText's conventions: "@-@" and "<unk>" stay whole, "@,@" and "@.@" do not.
  EXPECT_EQ(basic_english_tokenize(" = = Reception = = "), (Tokens{"=", "=", "reception", "=", "="}));
  EXPECT_EQ(basic_english_tokenize("1 @,@ 000 real @-@ time 2 @.@ 5 <unk>"),
            (Tokens{"1", "@", ",", "@", "000", "real", "@-@", "time", "2", "@", ".", "@", "5", "<unk>"}));
  // Removing '"' first joins its neighbours, and can make a <br />.
  EXPECT_EQ(basic_english_tokenize("a\"b <br \"/>c"), (Tokens{"ab", "c"}));
  // Only "<br />" exactly is a break; "<br/>" is a token.
  EXPECT_EQ(basic_english_tokenize("<br/>x"), (Tokens{"<br/>x"}));
  // Hyphens, slashes, brackets and other quotes stay inside tokens.
  EXPECT_EQ(basic_english_tokenize("e-mail a/b [c] \xE2\x80\x9C" "d\xE2\x80\x9D"),
            (Tokens{"e-mail", "a/b", "[c]", "\xE2\x80\x9C" "d\xE2\x80\x9D"}));
  EXPECT_EQ(basic_english_tokenize("3.14"), (Tokens{"3", ".", "14"}));
  EXPECT_TRUE(basic_english_tokenize("").empty());
  EXPECT_TRUE(basic_english_tokenize(" \t ;:; ").empty());
  // Unicode lowercase as Python's: \u00C9 -> \u00E9, \u0130 -> "i" + U+0307; U+00A0 separates.
  EXPECT_EQ(basic_english_tokenize("\xC3\x89T\xC3\x89\xC2\xA0\xC4\xB0"), (Tokens{"\xC3\xA9t\xC3\xA9", "i\xCC\x87"}));
  // A capital sigma ending a word lowercases to the final sigma U+03C2; elsewhere to U+03C3.
  EXPECT_EQ(basic_english_tokenize("\xCE\x9F\xCE\xA3\xCE\x9F\xCE\xA3 \xCE\xA3"),
            (Tokens{"\xCE\xBF\xCF\x83\xCE\xBF\xCF\x82", "\xCF\x83"}));
}

TEST(Tokenizer, RefusesInvalidUtf8) {
  try {
    basic_english_tokenize("ok \xFF bad");
    FAIL() << "no error for invalid UTF-8";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("byte offset 3"), std::string::npos) << e.what();
  }
}

TEST(Utf8, FirstInvalidByte) {
  EXPECT_FALSE(first_invalid_utf8("plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80").has_value());
  EXPECT_EQ(first_invalid_utf8("ab\x80"), 2u);              // a lone continuation byte
  EXPECT_EQ(first_invalid_utf8("a\xC0\xAF"), 1u);           // overlong '/'
  EXPECT_EQ(first_invalid_utf8("ab\xED\xA0\x80"), 2u);      // a UTF-16 surrogate
  EXPECT_EQ(first_invalid_utf8("\xC3\xA9\xE2\x82"), 2u);    // truncated at the end
  EXPECT_EQ(first_invalid_utf8("x\xF4\x90\x80\x80"), 1u);   // past U+10FFFF
  std::string encoded;
  for (char32_t cp : {U'A', U'\u00E9', U'\u20AC', U'\U0001F600'}) append_utf8(cp, encoded);
  EXPECT_EQ(encoded, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace distlab::data
