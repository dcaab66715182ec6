#include "planner/cut_pieces.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "comm/job.hpp"
#include "planner/piece_timing.hpp"
#include "planner/timing.hpp"
#include "train/context_split.hpp"
#include "train/cut_layers.hpp"

namespace distlab::planner {

namespace {

constexpr int64_t kColumns[] = {1, 4, 20};
constexpr memory::Recompute kPolicies[] = {memory::Recompute::kNone, memory::Recompute::kFull,
                                           memory::Recompute::kSelective};

// One cut layer on tensor x context thread ranks, `world` / (T x C) copies
// of them at once: every rank's median forward, backward, I and W, the
// slowest rank's of each.
Timed time_cut(const ModelShape& m, Cut cut, int world_size, memory::Recompute policy, int64_t columns) {
  comm::JobOptions job;
  job.ranks = world_size;
  job.announce = false;
  std::mutex mutex;
  Timed slowest;
  comm::run_job(job, [&](comm::Communicator& world) {
    at::set_num_threads(1);
    // Each copy T x C consecutive ranks: tensor groups of consecutive
    // ranks, context groups across them.
    const int rank = world.rank(), group = cut.tensor * cut.context;
    const int copy = rank / group, local = rank % group;
    const std::unique_ptr<comm::Communicator> tensor = world.split(rank / cut.tensor, rank, "tensor");
    const std::unique_ptr<comm::Communicator> across =
        world.split(copy * cut.tensor + local % cut.tensor, rank, "context");
    models::TransformerLm stage = piece_model(m, policy);
    train::CutLayers layers(stage, *tensor);
    const train::ContextSplit context{across.get(), context_parallel::Layout::kZigzag, context_parallel::Method::kRing};
    if (context.active()) train::split_sequences(stage, layers, context);
    torch::nn::Sequential units = stage->units();
    const int64_t tokens = sequence_tokens(m, cut.context);
    const at::Tensor hidden = at::randn({tokens, columns, m.lm.emsize});
    const at::Tensor grad = at::randn({tokens, columns, m.lm.emsize});
    auto into_grad = [&](const at::Tensor& out) { return (out * grad).sum(); };
    // Seconds 0: exactly 6 runs on every rank, as each run talks.
    const Timed t = time_piece(unit(units, 1), hidden, memory::Precision::kFp32, into_grad, 0,
                               !memory::recomputes_parameters(policy));
    std::lock_guard<std::mutex> lock(mutex);
    slowest.forward = std::max(slowest.forward, t.forward);
    slowest.backward = std::max(slowest.backward, t.backward);
    slowest.input = std::max(slowest.input, t.input);
    slowest.weight = std::max(slowest.weight, t.weight);
  });
  return slowest;
}

}  // namespace

std::vector<Cut> cuts_of(const ModelShape& m, int max_ranks) {
  std::vector<Cut> out;
  for (int t = 1; t <= max_ranks; t *= 2)
    for (int c = 1; t * c <= max_ranks; c *= 2)
      if (t * c > 1 && m.lm.nhead % t == 0 && m.lm.nhid % t == 0) out.push_back({t, c});
  return out;
}

void measure_cut_pieces(const ModelShape& m, int max_ranks, Profile& profile,
                        const std::function<void(const std::string&)>& say) {
  for (const Cut cut : cuts_of(m, max_ranks)) {
    const auto t0 = Clock::now();
    const int group = cut.tensor * cut.context;
    const int64_t sequence = sequence_tokens(m, cut.context);
    for (int world = group; world <= max_ranks; world *= 2)
      for (const memory::Recompute policy : kPolicies)
        for (const int64_t columns : kColumns) {
          const Timed t = time_cut(m, cut, world, policy, columns);
          PiecePoint p{"layer", "fp32", memory::to_string(policy), 1, sequence * columns,
                       t.forward, t.backward, t.input, t.weight};
          p.tensor = cut.tensor;
          p.context = cut.context;
          p.world = world;
          profile.pieces.push_back(p);
        }
    char line[160];
    std::snprintf(line, sizeof line,
                  "  a layer cut over %d tensor x %d context ranks, alone and among up to %d: 3 policies at 3 sizes (%.1f s)",
                  cut.tensor, cut.context, max_ranks, since(t0));
    say(line);
  }
}

}  // namespace distlab::planner
