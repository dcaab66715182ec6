// distlab-bench plan-memory: each rank's predicted peak memory against its
// own process's allocator meter, over layouts drawn from the whole
// enumeration (no timing: bytes do not depend on a quiet machine).
//
//   distlab-bench plan-memory                       30 layouts on 4 ranks, 30 on 8
//   distlab-bench plan-memory --ranks 2 --layouts 10 --preset tiny
//
// For each world size, --layouts drawn at random (--seed) from every layout
// the plan accepts, each run for 2 steps under distlab-run, a process a
// rank (gloo), lesson 11's --meter-memory line read per rank and set
// beside planner/memory_model.hpp's prediction for that rank. One line a
// layout (the worst rank's error, then every rank's), then the mean, the
// worst and how many ranks are within the 1 % target, per world size, by
// data-parallel strategy, and in all.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_registry.hpp"
#include "planner/enumerate.hpp"
#include "rank_memory.hpp"
#include "runs.hpp"

namespace distlab::bench {
namespace {

using namespace distlab::planner;

int run(const LayoutSample& o) {
  const ModelShape model = model_on_corpus(o.preset, 0, o.data);
  std::vector<double> all;
  std::map<std::string, std::vector<double>> by_strategy;
  for (const int world : o.ranks) {
    SearchSpace space;
    space.world = world;
    std::vector<Choice> accepted = enumerate(model, space).accepted;
    std::mt19937 random(o.seed);
    std::shuffle(accepted.begin(), accepted.end(), random);
    accepted.resize(std::min<size_t>(accepted.size(), size_t(o.layouts)));
    std::printf("%s preset on %d ranks: %zu layouts drawn, each rank's predicted peak against its own meter:\n",
                o.preset.c_str(), world, accepted.size());
    std::vector<double> errors;
    for (const Choice& c : accepted) {
      const std::vector<double> mine = rank_memory_line(model, c, capstone_command(model, c), predict_memory(model, c), o.run);
      errors.insert(errors.end(), mine.begin(), mine.end());
      auto& strategy = by_strategy[c.data.zero > 0 ? "ZeRO-" + std::to_string(c.data.zero) : "DDP"];
      strategy.insert(strategy.end(), mine.begin(), mine.end());
    }
    print_rank_errors((std::to_string(world) + " ranks").c_str(), errors);
    std::printf("\n");
    all.insert(all.end(), errors.begin(), errors.end());
  }
  for (const auto& [strategy, errors] : by_strategy) print_rank_errors(strategy.c_str(), errors);
  print_rank_errors("all (target 1 %)", all);
  return all.empty() ? 1 : 0;
}

Registration reg("plan-memory", "each rank's predicted peak memory against its own process's meter, many layouts",
                 [](CLI::App& cmd) {
  auto o = std::make_shared<LayoutSample>();
  o->layouts = 30;
  add_sample_flags(cmd, *o, "layouts drawn per world size");
  return [o] {
    finish_sample(*o);
    return run(*o);
  };
});

}  // namespace
}  // namespace distlab::bench
