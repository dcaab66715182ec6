#include "data/corpus_stats.hpp"

#include <cmath>
#include <cstdio>
#include <vector>

namespace distlab::data {
namespace {

std::vector<int64_t> counts_of(const at::Tensor& stream, int64_t vocab_size) {
  std::vector<int64_t> counts(static_cast<std::size_t>(vocab_size), 0);
  const at::Tensor s = stream.contiguous();
  const int64_t* ids = s.data_ptr<int64_t>();
  for (int64_t i = 0; i < s.numel(); ++i) ++counts[static_cast<std::size_t>(ids[i])];
  return counts;
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<std::size_t>(i), ",");
  return digits;
}

}  // namespace

CorpusSummary summarize(const Corpus& corpus) {
  CorpusSummary out;
  out.folder = corpus.folder;
  out.train_tokens = corpus.train.numel();
  out.valid_tokens = corpus.valid.numel();
  out.test_tokens = corpus.test.numel();
  out.vocab_size = corpus.vocab.size();

  const std::vector<int64_t> train = counts_of(corpus.train, out.vocab_size);
  const double n = static_cast<double>(out.train_tokens);
  for (int64_t c : train) {
    if (c > 0) out.train_unigram_entropy -= (static_cast<double>(c) / n) * std::log(static_cast<double>(c) / n);
  }

  const std::vector<int64_t> valid = counts_of(corpus.valid, out.vocab_size);
  const double denominator = n + static_cast<double>(out.vocab_size);
  double nll = 0.0;
  for (std::size_t w = 0; w < valid.size(); ++w) {
    if (valid[w] > 0) nll -= static_cast<double>(valid[w]) * std::log((static_cast<double>(train[w]) + 1.0) / denominator);
  }
  out.valid_unigram_loss = nll / static_cast<double>(out.valid_tokens);
  out.valid_unigram_ppl = std::exp(out.valid_unigram_loss);
  const int64_t unk = corpus.vocab.index(kUnkToken);
  out.valid_unk_tokens = valid[static_cast<std::size_t>(unk)];
  return out;
}

std::string format_summary(const CorpusSummary& s) {
  char line[256];
  std::string out = "corpus " + s.folder + ": train " + with_commas(s.train_tokens) + " / valid " +
                    with_commas(s.valid_tokens) + " / test " + with_commas(s.test_tokens) + " tokens, vocab " +
                    with_commas(s.vocab_size) + "\n";
  std::snprintf(line, sizeof(line),
                "unigram baseline: train entropy %.3f nats, valid loss %.3f (ppl %.1f), valid <unk> %.2f%%\n",
                s.train_unigram_entropy, s.valid_unigram_loss, s.valid_unigram_ppl,
                100.0 * static_cast<double>(s.valid_unk_tokens) / static_cast<double>(s.valid_tokens));
  return out + line;
}

}  // namespace distlab::data
