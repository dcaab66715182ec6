// lib/experts: the router's losses against their formulas by hand, the
// dispatch plan's capacity and drops, dispatch then combine as an identity,
// padding that changes nothing, and expert parallelism on 1-4 thread ranks
// equal to the naive layer holding every expert (expert_checks.hpp).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/threads_backend.hpp"
#include "expert_checks.hpp"
#include "experts/dispatch.hpp"
#include "experts/moe.hpp"
#include "experts/router.hpp"
#include "experts/trace_counts.hpp"
#include "flight/recorder.hpp"
#include "trace/clock.hpp"
#include "trace/recorder.hpp"
#include "support/differences.hpp"

namespace distlab::experts {
namespace {

using test_support::largest_difference;

// 4 tokens, 3 experts, k = 1, probabilities written out: the Switch loss
// E * sum_e f_e P_e by hand.
TEST(Router, BalancingLossIsTheSwitchFormula) {
  const at::Tensor probs = at::tensor({0.7, 0.2, 0.1,   //
                                       0.1, 0.6, 0.3,   //
                                       0.5, 0.3, 0.2,   //
                                       0.2, 0.2, 0.6},
                                      at::kFloat)
                               .view({4, 3});
  const Routing r = route(at::log(probs), 1);  // softmax(log p) = p
  EXPECT_LT(largest_difference(r.probs, probs), 1e-6);
  EXPECT_TRUE(at::equal(r.experts.view({-1}), at::tensor({0, 1, 0, 2}, at::kLong))) << r.experts;
  // Choices: 0, 1, 0, 2 -> f = (2/4, 1/4, 1/4); P = column means.
  const double P0 = (0.7 + 0.1 + 0.5 + 0.2) / 4, P1 = (0.2 + 0.6 + 0.3 + 0.2) / 4, P2 = (0.1 + 0.3 + 0.2 + 0.6) / 4;
  const double by_hand = 3 * (0.5 * P0 + 0.25 * P1 + 0.25 * P2);
  EXPECT_NEAR(balancing_loss(r).item<double>(), by_hand, 1e-6);
  // Perfectly even: f_e = P_e = 1/E, the loss is 1.
  const Routing even = route(at::zeros({6, 3}), 1);
  EXPECT_NEAR(balancing_loss(even).item<double>(), 1.0, 1e-6);
  // z-loss: the mean of logsumexp^2.
  const at::Tensor logits = at::tensor({1.0, 2.0, 3.0, 0.0, 0.0, 0.0}, at::kFloat).view({2, 3});
  const double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), l1 = std::log(3.0);
  EXPECT_NEAR(z_loss(logits).item<double>(), (l0 * l0 + l1 * l1) / 2, 1e-5);
  std::printf("  balancing loss %.6f (by hand %.6f), z-loss %.6f\n", balancing_loss(r).item<double>(), by_hand,
              z_loss(logits).item<double>());
}

TEST(Router, TopKWeightsAndRefusals) {
  const at::Tensor logits = at::randn({5, 4});
  const Routing r = route(logits, 2, /*normalize=*/true);
  EXPECT_LT(largest_difference(r.weights.sum(-1), at::ones({5})), 1e-6);
  EXPECT_TRUE(at::all(r.weights.select(1, 0) >= r.weights.select(1, 1)).item<bool>()) << "best first";
  try {
    route(logits, 5);
    ADD_FAILURE() << "top-5 of 4 experts accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("top-k 5 with 4 experts"), std::string::npos) << e.what();
  }
  try {
    (void)experts_per_rank(6, 4);
    ADD_FAILURE() << "6 experts on 4 ranks accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("6 experts do not divide by 4"), std::string::npos) << e.what();
  }
}

// Megatron's dispatcher test: with every weight 1/k and experts that return
// their input, dispatch then combine gives back the input, and its gradient.
TEST(Dispatch, WithWeightsOneOverKAndIdentityExpertsItReturnsTheInputAndItsGradient) {
  const int64_t T = 9, k = 2, E = 4;
  const at::Tensor chosen = at::stack({at::arange(T) % E, (at::arange(T) + 1) % E}, 1);
  const DispatchPlan plan = plan_dispatch(chosen, E, /*capacity_factor=*/0);
  EXPECT_EQ(plan.kept_total(), T * k);
  const at::Tensor x = at::randn({T, 6}).requires_grad_(true);
  const at::Tensor out = combine(dispatch(x, plan), at::full({T, k}, 1.0 / k), plan);
  EXPECT_LT(largest_difference(out, x), 1e-6);
  const at::Tensor G = at::randn({T, 6});
  (out * G).sum().backward();
  EXPECT_LT(largest_difference(x.grad(), G), 1e-6);
}

// Capacity: no expert takes more than ceil(T k cf / E); first choices
// before second ones; the drops counted per expert.
TEST(Dispatch, NoExpertTakesMoreThanItsCapacity) {
  const int64_t T = 12, k = 2, E = 3;
  // Every token's first choice is expert 0, its second expert 1 or 2.
  const at::Tensor chosen = at::stack({at::zeros({T}, at::kLong), 1 + at::arange(T) % 2}, 1);
  const DispatchPlan plan = plan_dispatch(chosen, E, /*capacity_factor=*/1.0);
  EXPECT_EQ(plan.capacity, capacity_of(T, k, 1.0, E));
  EXPECT_EQ(plan.capacity, 8);
  EXPECT_EQ(plan.kept, (std::vector<int64_t>{8, 6, 6}));
  EXPECT_EQ(plan.dropped, (std::vector<int64_t>{4, 0, 0}));
  // Expert 0 kept the first 8 tokens' first choices.
  const at::Tensor slots = plan.slots.narrow(0, 0, 8);
  EXPECT_TRUE(at::equal(slots, at::arange(8) * k)) << slots;
  EXPECT_EQ(capacity_of(T, k, 0, E), -1) << "cf 0: dropless";
}

// Padding each expert's rows to the capacity changes neither the outputs nor the gradients.
TEST(Dispatch, PaddedAndUnpaddedGiveTheSameOutputsAndGradients) {
  const int64_t T = 16, E = 4, d = 6;
  ExpertMlps experts(E, d, 10);
  Router router(d, E, 2);
  const at::Tensor x = at::randn({T, d});
  std::vector<at::Tensor> outs, grads;
  for (bool pad : {false, true}) {
    MoeOptions o;
    o.experts = E, o.top_k = 2, o.capacity_factor = 1.25, o.pad = pad;
    for (auto& p : experts->parameters()) p.mutable_grad() = at::Tensor();
    const at::Tensor xi = x.clone().requires_grad_(true);
    MoeStats stats;
    const at::Tensor out = moe_local(xi, router(xi), *experts, o, &stats);
    out.pow(2).sum().backward();
    outs.push_back(out);
    grads.push_back(xi.grad());
    grads.push_back(experts->w1.grad().clone());
    for (size_t e = 0; e < stats.kept.size(); ++e) EXPECT_LE(stats.kept[e], stats.capacity);
  }
  EXPECT_LT(largest_difference(outs[0], outs[1]), 1e-6);
  EXPECT_LT(largest_difference(grads[0], grads[2]), 1e-6);
  EXPECT_LT(largest_difference(grads[1], grads[3]), 1e-6);
}

// The forward's phases in the order they happen, read from the trace:
// moe_parallel records each phase as an event when it ends, the
// communicator each collective, and one recorder's sink keeps every rank's
// events in the order they were recorded. Rank 1 enters the layer only
// once rank 0 is inside the exchange of the counts (rank 0's flight ring
// holds that all-to-all), so rank 0 has to wait for it there: rank 0's
// dispatch ends after rank 1 entered. On each rank, between its entry and
// its return: the counts' and the rows' exchanges, dispatch's end, the
// experts', the rows' way back, combine's end; MoeStats' seconds are those
// phases' lengths.
TEST(Phases, DispatchWaitsForTheLatePeerThenTheExpertsThenCombine) {
  const int64_t T = 32, E = 4, d = 8;
  const auto recorder = std::make_shared<trace::Recorder>();
  const auto sink = std::make_shared<trace::MemorySink>();
  recorder->add_sink(sink);
  flight::RecorderOptions flight_options;
  flight_options.entries = 64;
  flight_options.dir = std::filesystem::temp_directory_path().string();
  comm::CommOptions options;
  options.recorder = recorder;
  options.flight = flight::Recorder::create(flight_options);
  const auto mark = [&](int rank, const std::string& what) {
    const int64_t now = trace::now_us();
    recorder->record(trace::Event{rank, "test", what, "test", now, now, 0, -1, 0, {}});
  };
  MoeStats stats[2];
  comm::run_thread_ranks(
      2,
      [&](comm::Communicator& comm) {
        const at::Tensor gate = at::randn({E, d}, at::detail::createCPUGenerator(1));
        ExpertMlps whole(E, d, 12);
        ExpertMlps mine(whole->slice(comm.rank() * 2, 2));
        MoeOptions o;
        o.experts = E, o.top_k = 2;
        const at::Tensor x = at::randn({T, d}, at::detail::createCPUGenerator(10 + comm.rank()));
        const Routing routing = route(at::linear(x, gate), o.top_k);
        if (comm.rank() == 1) {
          // Until rank 0's ring holds its first all-to-all (the counts'); the
          // deadline only keeps a broken layer from hanging the test.
          const auto ring = options.flight->ring_of(0, 2);
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          const auto rank0_exchanges = [&] {
            for (const flight::Entry& e : ring->snapshot().entries)
              if (e.op == "all_to_all") return true;
            return false;
          };
          while (!rank0_exchanges() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
          EXPECT_TRUE(rank0_exchanges()) << "rank 0 never began the exchange of the counts";
        }
        mark(comm.rank(), "enters");
        moe_parallel(comm, x, routing, *mine, o, &stats[comm.rank()], /*tag=*/3);
        mark(comm.rank(), "returns");
      },
      options);
  // Each rank's entry, collectives, phases and return, in recorded order.
  const std::vector<trace::Event> events = sink->events();
  std::vector<std::string> seen[2];
  size_t rank1_enters = events.size(), rank0_dispatch_ends = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const trace::Event& e = events[i];
    if (e.rank < 0 || e.rank > 1) continue;
    if (e.category == "test" || e.category == "moe") seen[e.rank].push_back(e.name);
    if (e.category == "moe") {  // MoeStats' seconds are the phases' lengths
      const double MoeStats::*phase = e.name == "moe dispatch" ? &MoeStats::dispatch_s
                                      : e.name == "moe experts" ? &MoeStats::experts_s
                                                                : &MoeStats::combine_s;
      EXPECT_DOUBLE_EQ(stats[e.rank].*phase, double(e.duration_us()) * 1e-6) << "rank " << e.rank << " " << e.name;
    }
    if (e.category == "collective") seen[e.rank].push_back(e.arg("collective", e.name));
    if (e.rank == 1 && e.name == "enters") rank1_enters = i;
    if (e.rank == 0 && e.name == "moe dispatch") rank0_dispatch_ends = i;
  }
  const std::vector<std::string> in_order{"enters",      "all_to_all",  "all_to_all", "moe dispatch",
                                          "moe experts", "all_to_all",  "moe combine", "returns"};
  for (int r = 0; r < 2; ++r) EXPECT_EQ(seen[r], in_order) << "rank " << r;
  EXPECT_LT(rank1_enters, rank0_dispatch_ends) << "rank 0's dispatch ended before rank 1 had entered the layer";
}

// Every token chooses experts 2 and 3 (rank 1's): rank 0's experts get no
// rows, and rank 0 still takes part in the backward's exchanges (its part
// of the graph keeps them): outputs and the input's gradient as the naive
// layer's, on both ranks.
TEST(ExpertParallelEdges, ARankWhoseExpertsGetNoRowsStillExchangesInTheBackward) {
  const int64_t T = 12, E = 4, d = 6;
  comm::run_thread_ranks(2, [&](comm::Communicator& comm) {
    const ExpertMlps whole(at::randn({E, d, 8}, at::detail::createCPUGenerator(2)),
                           at::randn({E, 8}, at::detail::createCPUGenerator(3)),
                           at::randn({E, 8, d}, at::detail::createCPUGenerator(4)),
                           at::randn({E, d}, at::detail::createCPUGenerator(5)));
    ExpertMlps mine(whole->slice(comm.rank() * 2, 2)), all(whole->slice(0, E));
    MoeOptions o;
    o.experts = E, o.top_k = 2;
    const at::Tensor logits = at::tensor({-5.0f, -5.0f, 5.0f, 4.0f}).repeat({T, 1});
    const Routing routing = route(logits, o.top_k);
    const at::Tensor x_in = at::randn({T, d}, at::detail::createCPUGenerator(10 + comm.rank()));
    const at::Tensor x = x_in.clone().requires_grad_(true), x_ref = x_in.clone().requires_grad_(true);
    MoeStats stats;
    const at::Tensor out = moe_parallel(comm, x, routing, *mine, o, &stats, /*tag=*/7);
    out.sum().backward();
    const at::Tensor ref = moe_local(x_ref, routing, *all, o);
    ref.sum().backward();
    EXPECT_EQ(stats.sent_rows.at(0), 0) << "no token went to rank 0's experts";
    EXPECT_LE(largest_difference(out, ref), 1e-5) << comm.self();
    EXPECT_LE(largest_difference(x.grad(), x_ref.grad()), 1e-5) << comm.self();
  });
}

// A layer's training forwards add up into the step's counts (two forwards:
// twice one's), taken once; on the trace one counter sample per take, its
// series every expert's kept and dropped assignments and the capacity.
TEST(TraceCounts, AStepsForwardsAddUpAndBecomeOneCounterSample) {
  const int64_t T = 20, E = 4, d = 6;
  MoeOptions o;
  o.experts = E, o.top_k = 2, o.capacity_factor = 1.0;
  MoeLayer layer(Router(d, E, 2), ExpertMlps(E, d, 8), o);
  const at::Tensor x = at::randn({T, d}, at::detail::createCPUGenerator(3));
  layer(x);
  const MoeStats one = layer->last_stats();
  layer(x);
  const MoeStats step = layer->take_step_counts();
  ASSERT_EQ(step.kept.size(), static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    EXPECT_EQ(step.kept[size_t(e)], 2 * one.kept[size_t(e)]);
    EXPECT_EQ(step.dropped[size_t(e)], 2 * one.dropped[size_t(e)]);
  }
  EXPECT_TRUE(layer->take_step_counts().kept.empty()) << "the counts start afresh";
  trace::Recorder recorder;
  auto sink = std::make_shared<trace::MemorySink>();
  recorder.add_sink(sink);
  record_tokens_per_expert(&recorder, 3, "layer 1", step);
  const auto events = sink->events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].is_counter());
  EXPECT_EQ(events[0].name, "experts layer 1");
  EXPECT_EQ(events[0].rank, 3);
  EXPECT_EQ(events[0].arg("kept 2"), std::to_string(step.kept[2]));
  EXPECT_EQ(events[0].arg("dropped 0"), std::to_string(step.dropped[0]));
  EXPECT_EQ(events[0].arg("capacity"), std::to_string(capacity_of(T, 2, 1.0, E)));
}

struct Case {
  int ranks;
  int64_t experts, top_k;
  double capacity_factor;
};

class ExpertParallel : public ::testing::TestWithParam<Case> {};

// Expert parallelism on 1-4 thread ranks: outputs, the router's gradient
// and every expert's gradient equal the naive layer's (expert_checks.hpp).
TEST_P(ExpertParallel, EqualsEveryExpertOnEveryRank) {
  const Case c = GetParam();
  MoeOptions o;
  o.experts = c.experts, o.top_k = c.top_k, o.capacity_factor = c.capacity_factor;
  comm::run_thread_ranks(c.ranks, [&](comm::Communicator& comm) {
    const double worst = testing::largest_difference_from_naive(comm, o);
    EXPECT_LE(worst, testing::kTolerance) << comm.self();
    if (comm.rank() == 0)
      std::printf("  %d ranks, %lld experts, top-%lld, %s: largest difference %.3g\n", c.ranks,
                  static_cast<long long>(c.experts), static_cast<long long>(c.top_k),
                  c.capacity_factor > 0 ? ("capacity factor " + std::to_string(c.capacity_factor)).c_str()
                                        : "dropless",
                  worst);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ExpertParallel,
                         ::testing::Values(Case{1, 4, 2, 0}, Case{2, 4, 1, 0}, Case{2, 4, 2, 1.0}, Case{3, 6, 2, 0},
                                           Case{3, 6, 2, 1.25}, Case{4, 8, 2, 0}, Case{4, 4, 1, 1.0}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           return std::to_string(c.ranks) + "_ranks_" + std::to_string(c.experts) + "_experts_top" +
                                  std::to_string(c.top_k) + (c.capacity_factor > 0 ? "_capacity" : "_dropless");
                         });

}  // namespace
}  // namespace distlab::experts
