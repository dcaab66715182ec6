// The bundled corpus (datasets/austen) read end to end: its vocabulary is
// the one torchtext builds from the same file, its token counts and unigram
// baseline agree with a Python computation, and the baseline itself is
// checked on a corpus small enough to work out by hand.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "data/batching.hpp"
#include "data/corpus.hpp"
#include "data/corpus_stats.hpp"
#include "data/wikitext.hpp"
#include "reference.hpp"
#include "support/required_tool.hpp"

namespace distlab::data {
namespace {

const std::string kBundled = std::string(DISTLAB_SOURCE_DIR) + "/datasets/austen";

const Corpus& bundled() {
  static const Corpus corpus = load_corpus(kBundled);
  return corpus;
}

TEST(BundledCorpus, VocabularyAndCountsMatchTorchtext) {
  const auto why = testing_ref::torchtext_unavailable();
  DISTLAB_SKIP_OR_FAIL_WITHOUT(!why, *why);
  const nlohmann::json ref = testing_ref::run_torchtext_on_corpus(kBundled);
  const auto itos = ref["itos"].get<std::vector<std::string>>();
  const Corpus& corpus = bundled();
  ASSERT_EQ(corpus.vocab.size(), static_cast<int64_t>(itos.size())) << "reference: " << ref["torchtext"];
  // The first entries one by one, for a readable failure; then all of them.
  for (std::size_t i = 0; i < 50; ++i) ASSERT_EQ(corpus.vocab.itos()[i], itos[i]) << "index " << i;
  EXPECT_EQ(corpus.vocab.itos(), itos);

  EXPECT_EQ(corpus.train.numel(), ref["tokens"]["train"].get<int64_t>());
  EXPECT_EQ(corpus.valid.numel(), ref["tokens"]["valid"].get<int64_t>());
  EXPECT_EQ(corpus.test.numel(), ref["tokens"]["test"].get<int64_t>());

  const CorpusSummary s = summarize(corpus);
  EXPECT_NEAR(s.train_unigram_entropy, ref["train_entropy"].get<double>(), 1e-9);
  EXPECT_NEAR(s.valid_unigram_loss, ref["valid_unigram_loss"].get<double>(), 1e-9);
  EXPECT_EQ(s.valid_unk_tokens, ref["valid_unk"].get<int64_t>());
  std::cout << format_summary(s);
}

TEST(BundledCorpus, SizeAndSplits) {
  const CorpusSummary s = summarize(bundled());
  // Big enough to train on, split about 80/10/10.
  EXPECT_GT(s.train_tokens, 500'000);
  EXPECT_GT(s.valid_tokens, s.train_tokens / 20);
  EXPECT_LT(s.valid_tokens, s.train_tokens / 5);
  EXPECT_GT(s.test_tokens, s.train_tokens / 20);
  EXPECT_LT(s.test_tokens, s.train_tokens / 5);
  EXPECT_GT(s.vocab_size, 1000);
  EXPECT_EQ(bundled().vocab.itos()[0], kUnkToken);
  EXPECT_LT(s.valid_unigram_loss, std::log(static_cast<double>(s.vocab_size)));  // better than uniform
}

// The corpus tokenizes the train split once for the vocabulary and its
// ids; the tutorial's data_process tokenizes the lines again: the same ids.
TEST(BundledCorpus, TrainIdsAreTheTutorialsDataProcess) {
  const WikiTextLines lines = read_wikitext(kBundled);
  EXPECT_TRUE(bundled().train.equal(data_process(lines.train, bundled().vocab)));
  EXPECT_TRUE(bundled().valid.equal(data_process(lines.valid, bundled().vocab)));
}

TEST(BundledCorpus, TutorialBatchesOfTheTrainSplit) {
  const at::Tensor& stream = bundled().train;
  const int64_t t = stream.numel();
  const at::Tensor batched = batchify(stream, 20);
  const int64_t rows = t / 20;
  ASSERT_EQ(batched.sizes(), (at::IntArrayRef{rows, 20}));
  // Column j is the j-th of 20 equal stretches of the stream.
  for (int64_t j : {0, 7, 19}) {
    for (int64_t r : {int64_t{0}, rows / 2, rows - 1}) {
      EXPECT_EQ(batched[r][j].item<int64_t>(), stream[j * rows + r].item<int64_t>()) << r << "," << j;
    }
  }
  // Two replicas as the tutorial: rows [0, rows/2) and [rows/2, 2 (rows/2)).
  const at::Tensor second = batchify(stream, 20, 1, 2, /*is_train=*/true);
  ASSERT_EQ(second.size(0), rows / 2);
  EXPECT_TRUE(second.equal(batched.narrow(0, rows / 2, rows / 2)));
  // One batch: (20, 35) input, 700 targets; target (s, n) is input (n, s + 1).
  const Batch b = get_batch(second, 0);
  ASSERT_EQ(b.data.sizes(), (at::IntArrayRef{20, 35}));
  ASSERT_EQ(b.targets.numel(), 700);
  for (int64_t s : {0, 10, 33}) {
    for (int64_t n : {0, 5, 19}) EXPECT_EQ(b.targets[s * 20 + n].item<int64_t>(), b.data[n][s + 1].item<int64_t>());
  }
}

TEST(CorpusStats, UnigramBaselineByHand) {
  const std::string dir = testing_ref::temp_path("tiny_corpus");
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/wiki.train.tokens") << " a a b \n";
  std::ofstream(dir + "/wiki.valid.tokens") << " a c \n";
  std::ofstream(dir + "/wiki.test.tokens") << " b \n";
  const CorpusSummary s = summarize(load_corpus(dir));
  // Vocab <unk> a b (V = 3); train counts 0, 2, 1 (N = 3); add-one: p = 1/6, 3/6, 2/6.
  EXPECT_EQ(s.vocab_size, 3);
  EXPECT_NEAR(s.train_unigram_entropy, -(2.0 / 3 * std::log(2.0 / 3) + 1.0 / 3 * std::log(1.0 / 3)), 1e-12);
  // valid = a, <unk>: -(ln 1/2 + ln 1/6) / 2.
  EXPECT_NEAR(s.valid_unigram_loss, (std::log(2.0) + std::log(6.0)) / 2, 1e-12);
  EXPECT_NEAR(s.valid_unigram_ppl, std::sqrt(12.0), 1e-9);
  EXPECT_EQ(s.valid_unk_tokens, 1);
}

TEST(CorpusStats, DefaultFolderIsTheBundledCorpus) {
  ::unsetenv("DISTLAB_DATA");
  EXPECT_EQ(default_corpus_folder(), kBundled);
  ::setenv("DISTLAB_DATA", "/some/where", 1);
  EXPECT_EQ(default_corpus_folder(), "/some/where");
  ::unsetenv("DISTLAB_DATA");
}

}  // namespace
}  // namespace distlab::data
