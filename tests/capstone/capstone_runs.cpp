#include "capstone_runs.hpp"

#include <functional>

#include <gtest/gtest.h>

#include <mutex>
#include <string>

#include "comm/job.hpp"
#include "support/differences.hpp"
#include "support/small_corpus.hpp"

namespace distlab::tests {

const data::Corpus& small_corpus() {
  static const data::Corpus corpus = [] {
    test_support::SmallCorpusText text = test_support::small_corpus_text();
    data::WikiTextLines lines;
    lines.folder = "(tests/support/small_corpus.hpp)";
    lines.train = std::move(text.train);
    lines.valid = std::move(text.valid);
    lines.test = std::move(text.test);
    return data::build_corpus(lines);
  }();
  return corpus;
}

std::vector<train::TrainResult> run_threads(const train::TrainerOptions& o, const data::Corpus& corpus, int ranks,
                                            const std::string& device) {
  comm::JobOptions job;
  job.backend = "threads";
  job.device = device;
  job.ranks = ranks > 0 ? ranks : o.plan.layout.world_size();
  std::vector<train::TrainResult> results(static_cast<size_t>(job.ranks));
  std::mutex mutex;
  comm::run_job(job, [&](comm::Communicator& comm) {
    train::TrainResult r = train::train(comm, corpus, o);
    std::lock_guard<std::mutex> lock(mutex);
    results[static_cast<size_t>(comm.rank())] = std::move(r);
  });
  return results;
}

train::TrainerOptions tiny_options(int pipeline, int replicas) {
  train::TrainerOptions o;
  o.plan.layout = {pipeline, replicas};
  o.model.preset = "tiny";
  o.model.dropout = 0;
  o.loop.epochs = 1;
  o.loop.batches_per_epoch = 5;
  o.loop.eval_batches = 2;
  o.loop.quiet = true;
  o.loop.keep_final_state = true;
  return o;
}

const std::vector<DimensionCase>& every_dimension() {
  static const std::vector<DimensionCase> cases = {
      {"2x1 tensor 2", [](train::TrainerOptions& o) { o.plan.layout = {2, 1, 2}; }},
      {"1x1 context 2 ring", [](train::TrainerOptions& o) { o.plan.layout = {1, 1, 1, 2}; }},
      {"1x1 context 2 ulysses",
       [](train::TrainerOptions& o) {
         o.plan.layout = {1, 1, 1, 2};
         o.plan.context.method = context_parallel::Method::kUlysses;
       }},
      {"1x2 experts 4 over 2",
       [](train::TrainerOptions& o) {
         o.plan.layout = {1, 2};
         o.model.moe.experts = 4, o.model.moe.top_k = 2, o.plan.experts.parallel = 2;
       }},
      {"1x2 zero 3", [](train::TrainerOptions& o) { o.plan.layout = {1, 2}, o.plan.data.zero = 3; }},
  };
  return cases;
}

StopAndResume stop_and_resume_with(train::TrainerOptions o, const std::string& dir, int64_t stop, int resume_ranks,
                                   const std::function<void(train::TrainerOptions&)>& change) {
  StopAndResume runs;
  o.checkpoints.dir = dir;
  o.checkpoints.every = stop;
  o.loop.stop_after_steps = stop;
  runs.first = run_threads(o);
  EXPECT_TRUE(runs.first.at(0).interrupted);
  EXPECT_EQ(runs.first.at(0).steps, stop);
  o.loop.stop_after_steps = -1;
  o.checkpoints.resume = true;
  change(o);
  runs.resumed = run_threads(o, small_corpus(), resume_ranks);
  for (size_t rank = 0; rank < runs.resumed.size(); ++rank)
    EXPECT_EQ(runs.resumed[rank].resumed_from_step, stop) << "rank " << rank;
  return runs;
}

StopAndResume stop_and_resume(train::TrainerOptions o, const std::string& dir, int64_t stop, int resume_ranks,
                              int resume_tensor) {
  return stop_and_resume_with(o, dir, stop, resume_ranks, [&](train::TrainerOptions& resumed) {
    if (resume_tensor > 0) resumed.plan.layout.tensor = resume_tensor;
  });
}

StopAndResume stop_and_resume_on(const train::TrainerOptions& o, const std::string& dir, int64_t stop,
                                 const train::Layout& resumed_layout) {
  return stop_and_resume_with(o, dir, stop, 0, [&](train::TrainerOptions& resumed) { resumed.plan.layout = resumed_layout; });
}

double largest_state_difference(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  if (a.size() != b.size()) return test_support::kInfinite;
  test_support::Worst worst;
  for (const auto& [name, value] : a) {
    const auto other = b.find(name);
    if (other == b.end()) return test_support::kInfinite;
    worst.add(value, other->second);
  }
  return worst.value;
}

}  // namespace distlab::tests
