// What a corpus is, in numbers, and the loss a model must beat.
//
// The unigram baseline: a model that ignores context and predicts each token
// with its train-split frequency, add-one smoothed over the vocabulary so
// that every token has a probability,
//
//   p(w) = (count_train(w) + 1) / (T_train + V),
//
// evaluated on the valid stream as a mean negative log-likelihood in nats,
// the unit of CrossEntropyLoss. A language model that learned anything from
// context has a validation loss well below it.
#pragma once

#include <cstdint>
#include <string>

#include "data/corpus.hpp"

namespace distlab::data {

struct CorpusSummary {
  std::string folder;
  int64_t train_tokens = 0;
  int64_t valid_tokens = 0;
  int64_t test_tokens = 0;
  int64_t vocab_size = 0;
  int64_t valid_unk_tokens = 0;        // valid tokens not in the train vocabulary (and literal <unk>)
  double train_unigram_entropy = 0.0;  // nats/token, maximum-likelihood unigram of train on train
  double valid_unigram_loss = 0.0;     // nats/token, smoothed train unigram on valid: the baseline
  double valid_unigram_ppl = 0.0;      // exp(valid_unigram_loss)
};

CorpusSummary summarize(const Corpus& corpus);

// A few lines for a program's start, e.g.
//   corpus datasets/austen: train 612,345 / valid 70,123 / test 71,234 tokens, vocab 14,567
//   unigram baseline: train entropy 6.21 nats, valid loss 6.35 (ppl 572.1), valid <unk> 0.81%
std::string format_summary(const CorpusSummary& summary);

}  // namespace distlab::data
