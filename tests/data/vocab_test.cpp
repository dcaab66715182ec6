// The vocabulary's order against torchtext's build_vocab_from_iterator, and
// by hand: specials first, then descending count, ties by code point.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/errors.hpp"
#include "data/tokenizer.hpp"
#include "data/vocab.hpp"
#include "reference.hpp"
#include "support/required_tool.hpp"

namespace distlab::data {
namespace {

Vocab vocab_of(const std::vector<std::string>& lines) {
  TokenCounter counter;
  for (const std::string& line : lines) counter.add(basic_english_tokenize(line));
  return Vocab::build_with_unk(counter);
}

const std::vector<std::string> kSmallText = {
    " = Pride and Prejudice = ",
    "",
    " It is a truth universally acknowledged , that a single man in possession of a good fortune , must be "
    "in want of a wife . ",
    " \"My dear Mr. Bennet,\" said his lady to him one day, \"have you heard that Netherfield Park is let at "
    "last?\" ",
    " The <unk> of <unk> was 1 @,@ 000 ; a real @-@ time <unk> . Zebra zebra \u00C9clair \u00E9clair eclair "
    "apple Apple b B \u4E2D z \U0001F600 ",
};

TEST(Vocab, MatchesTorchtextOnSmallText) {
  const auto why = testing_ref::torchtext_unavailable();
  DISTLAB_SKIP_OR_FAIL_WITHOUT(!why, *why);
  const nlohmann::json expected = testing_ref::run_torchtext("vocab", kSmallText);
  EXPECT_EQ(vocab_of(kSmallText).itos(), expected["itos"].get<std::vector<std::string>>())
      << "reference: " << expected["torchtext"];
}

TEST(Vocab, OrderWorkedOutByHand) {
  // Counts: a 3, c 3, b 2, <unk> 2 (a special: moved to the front), z 1, y 1.
  TokenCounter counter;
  counter.add({"c", "a", "b", "<unk>", "z"});
  counter.add({"a", "c", "y", "b", "<unk>", "c", "a"});
  EXPECT_EQ(counter.total(), 12);
  const Vocab vocab = Vocab::build_with_unk(counter);
  EXPECT_EQ(vocab.itos(), (std::vector<std::string>{"<unk>", "a", "c", "b", "y", "z"}));
  EXPECT_EQ(vocab.index("b"), 3);
  EXPECT_EQ(vocab.index("never seen"), 0);  // the default index is <unk>'s
  EXPECT_EQ(vocab.indices({"z", "a", "?"}), (std::vector<int64_t>{5, 1, 0}));
  EXPECT_EQ(vocab.token(2), "c");

  // min_freq and several specials, in the order given.
  const Vocab pruned = Vocab::build(counter, {"<pad>", "<unk>"}, /*min_freq=*/2);
  EXPECT_EQ(pruned.itos(), (std::vector<std::string>{"<pad>", "<unk>", "a", "c", "b"}));
  EXPECT_FALSE(pruned.default_index().has_value());
  EXPECT_THROW(pruned.index("z"), DataError);  // no default: an error, as in torchtext
  EXPECT_THROW(pruned.token(5), DataError);
}

TEST(Vocab, TiesCompareByCodePointNotLocale) {
  // Python sorts str by code point: "B" < "a" < "z" < "\u00E9" < "\u4E2D".
  TokenCounter counter;
  counter.add({"\u4E2D", "z", "\u00E9", "a", "B"});
  EXPECT_EQ(Vocab::build_with_unk(counter).itos(),
            (std::vector<std::string>{"<unk>", "B", "a", "z", "\u00E9", "\u4E2D"}));
}

}  // namespace
}  // namespace distlab::data
