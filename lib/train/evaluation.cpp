// The true mean loss over the first eval_batches batches of a split (all
// when 0). Replicas evaluate every R-th batch and add their sums; the last
// stage tells the other stages. The same value on every rank.
#include <ATen/ATen.h>

#include "data/batching.hpp"
#include "memory/precision.hpp"
#include "train/batches.hpp"
#include "train/run.hpp"

namespace distlab::train {

StageForward in_precision(StageForward forward, const Run& run) {
  const memory::Precision precision = run.o.plan.memory.precision;
  if (precision == memory::Precision::kFp32) return forward;
  return [forward = std::move(forward), precision, device = run.world.device().type()](const at::Tensor& x) {
    memory::ComputeIn guard(precision, device);
    return forward(x);
  };
}

double evaluate(Run& run, const at::Tensor& source) {
  RankBuild& rank = run.rank;
  const RankBuild::Evaluating scope = rank.evaluating();
  const int R = rank.groups.replica->size(), me = rank.groups.place.replica;
  comm::Communicator& averaging = rank.groups.averaging();  // the replicas (and context ranks) whose sums add up
  const auto starts = data::batch_starts(source, run.o.loop.bptt, run.o.loop.eval_batches > 0 ? run.o.loop.eval_batches : -1);
  std::map<int, StageForward> forwards;  // this rank's stages by number
  for (size_t c = 0; c < rank.stages.size(); ++c)
    forwards[rank.stage_numbers[c]] = in_precision([&rank, c](const at::Tensor& x) { return rank.stages[c]->forward(x); }, run);
  LossSum total;
  // Replica `me` takes batches me, me + R, ... When each forward needs every
  // rank of a group (experts spread over replicas), a replica whose batches
  // ran out runs the first one again, uncounted.
  const size_t rounds = (starts.size() + static_cast<size_t>(R) - 1) / static_cast<size_t>(R);
  for (size_t round = 0; round < rounds; ++round) {
    const size_t k = round * static_cast<size_t>(R) + static_cast<size_t>(me);
    const bool counted = k < starts.size();
    if (!counted && !rank.forwards_together) break;
    const auto [whole_input, whole_target] = lm_batch(source, starts[counted ? k : 0], run.o.loop.bptt, run.world.device());
    const auto [input, target] = my_rows(rank.context, whole_input, whole_target);
    const LossSum part = forward_loss_sum(*rank.groups.pipeline, rank.rank_of_stage, forwards, input, target);
    if (!counted) continue;
    total.sum += part.sum;
    total.tokens += part.tokens;
  }
  at::Tensor sums = at::tensor({total.sum, static_cast<double>(total.tokens)}, at::kDouble).to(run.world.device());
  if (rank.last && averaging.size() > 1) averaging.native_all_reduce(sums);
  at::Tensor mean = (sums[0] / sums[1].clamp_min(1)).reshape({1}).contiguous();
  if (rank.groups.pipeline->size() > 1) rank.groups.pipeline->native_broadcast(mean, rank.last_rank());
  return mean.cpu().item<double>();
}

}  // namespace distlab::train
