// What the capstone tests share: a small corpus, the trainer run on
// thread ranks, and the tiny options every comparison starts from.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "data/corpus.hpp"
#include "train/trainer.hpp"

namespace distlab::tests {

// The corpus the comparisons train on (tests/support/small_corpus.hpp), built once.
const data::Corpus& small_corpus();

// The largest |a - b| over two states by name (support/differences.hpp's
// Worst); +infinity when the names differ or any tensor holds a NaN.
double largest_state_difference(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b);

// Every rank's result of train() on `ranks` thread ranks (0: o.plan.layout.world_size()), indexed by world rank,
// their tensors on `device` (cpu, or cuda: the ranks share the GPUs round-robin).
std::vector<train::TrainResult> run_threads(const train::TrainerOptions& o,
                                            const data::Corpus& corpus = small_corpus(), int ranks = 0,
                                            const std::string& device = "cpu");

// The tiny preset without dropout (equality needs no random masks), one
// epoch of 5 steps, 2 validation batches, quiet, final parameters kept.
train::TrainerOptions tiny_options(int pipeline, int replicas);

// The dimensions beyond data and pipeline ranks, one small layout each on
// tiny_options(2, 1): 2 stages x 2 tensor ranks, 1 x 2 context ranks over
// the ring and over Ulysses, 4 experts spread over 2 replicas, ZeRO-3 over
// 2 replicas. What every feature must join (mixed precision,
// recomputation).
struct DimensionCase {
  const char* name;
  std::function<void(train::TrainerOptions&)> set;
};
const std::vector<DimensionCase>& every_dimension();

// `o` with a checkpoint every `stop` steps into `dir`, stopped after step
// `stop` (`first`), then resumed from there to the end (`resumed`) on
// `resume_ranks` thread ranks (0: the layout's), with `resume_tensor`
// tensor ranks per stage (0: the layout's). Checks that the first run
// stopped and that every rank resumed from step `stop`.
struct StopAndResume {
  std::vector<train::TrainResult> first, resumed;
};
StopAndResume stop_and_resume(train::TrainerOptions o, const std::string& dir, int64_t stop, int resume_ranks = 0,
                              int resume_tensor = 0);
// The same, resumed on `resumed_layout` (any other sizes, the context's
// included), not elastic: on as many thread ranks as it needs.
StopAndResume stop_and_resume_on(const train::TrainerOptions& o, const std::string& dir, int64_t stop,
                                 const train::Layout& resumed_layout);
// The same, resumed with `change` made to the options (on `resume_ranks`
// thread ranks, 0: as many as the changed layout needs).
StopAndResume stop_and_resume_with(train::TrainerOptions o, const std::string& dir, int64_t stop, int resume_ranks,
                                   const std::function<void(train::TrainerOptions&)>& change);

}  // namespace distlab::tests
