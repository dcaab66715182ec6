#include "data/corpus.hpp"

#include <cstdlib>
#include <string>
#include <vector>

#include "data/batching.hpp"
#include "data/errors.hpp"
#include "data/tokenizer.hpp"

#ifndef DISTLAB_DEFAULT_DATASET
#define DISTLAB_DEFAULT_DATASET "datasets/austen"
#endif

namespace distlab::data {

const at::Tensor& Corpus::stream(Split split) const {
  switch (split) {
    case Split::kTrain: return train;
    case Split::kValid: return valid;
    case Split::kTest: return test;
  }
  return train;
}

Corpus build_corpus(const WikiTextLines& lines) {
  // The train split is tokenized once (most of a corpus's loading time):
  // its tokens are counted for the vocabulary, then looked up in it, as
  // data_process would look them up after tokenizing the lines again.
  std::vector<std::vector<std::string>> train_tokens;
  train_tokens.reserve(lines.train.size());
  TokenCounter counter;
  for (const std::string& line : lines.train) {
    train_tokens.push_back(basic_english_tokenize(line));
    counter.add(train_tokens.back());
  }
  Corpus corpus;
  corpus.folder = lines.folder;
  corpus.vocab = Vocab::build_with_unk(counter);
  std::vector<int64_t> ids;
  for (const auto& tokens : train_tokens)
    for (const std::string& token : tokens) ids.push_back(corpus.vocab.index(token));
  train_tokens.clear();
  corpus.train = at::tensor(ids, at::kLong);
  corpus.valid = data_process(lines.valid, corpus.vocab);
  corpus.test = data_process(lines.test, corpus.vocab);
  for (Split split : {Split::kTrain, Split::kValid, Split::kTest}) {
    if (corpus.stream(split).numel() == 0) {
      throw DataError("dataset split '" + split_path(lines.folder, split) +
                      "' has no tokens after tokenizing: regenerate or re-download it");
    }
  }
  return corpus;
}

Corpus load_corpus(const std::string& folder) { return build_corpus(read_wikitext(folder)); }

std::string default_corpus_folder() {
  if (const char* env = std::getenv("DISTLAB_DATA"); env != nullptr && *env != '\0') return env;
  return DISTLAB_DEFAULT_DATASET;
}

}  // namespace distlab::data
