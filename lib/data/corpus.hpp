// A corpus ready for language modelling: the vocabulary of its train split
// and the three splits as token streams, built exactly as the tutorial's
// run_worker does (vocab from the train split, "<unk>" default, data_process).
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "data/vocab.hpp"
#include "data/wikitext.hpp"

namespace distlab::data {

struct Corpus {
  std::string folder;
  Vocab vocab;
  at::Tensor train;  // (T_train,) int64
  at::Tensor valid;  // (T_valid,) int64
  at::Tensor test;   // (T_test,) int64
  const at::Tensor& stream(Split split) const;
};

Corpus build_corpus(const WikiTextLines& lines);
Corpus load_corpus(const std::string& folder);

// The folder every program reads unless told otherwise: $DISTLAB_DATA when
// set, else the bundled corpus datasets/austen of this source tree.
std::string default_corpus_folder();

}  // namespace distlab::data
