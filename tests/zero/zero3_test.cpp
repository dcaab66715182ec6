// What ZeRO-3 holds and when it talks: between steps only shards; each unit
// gathered twice and reduce-scattered once (3 Psi); the prefetch is queued
// before the previous unit's forward begins. (Equality with one process and
// DDP is in zero_checks.cpp, with every other flavor.)
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/types.h>

#include <iostream>
#include <map>
#include <mutex>
#include <optional>

#include "comm/threads_backend.hpp"
#include "models/square_mlp.hpp"
#include "trace/recorder.hpp"
#include "zero/storage.hpp"
#include "zero/zero3.hpp"
#include "support/recording.hpp"

namespace distlab::zero {
namespace {

using comm::Communicator;

// 8 -> 16 -> 16 -> 5: units of 144, 272 and 85 elements (501 in all).
torch::nn::Sequential three_units() {
  return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::Tanh(), torch::nn::Linear(16, 16),
                               torch::nn::Tanh(), torch::nn::Linear(16, 5));
}

int64_t held_parameter_bytes(torch::nn::Module& model) {
  int64_t bytes = 0;
  for (const auto& p : model.parameters()) bytes += storage_bytes(p);  // views of one buffer: counted per unit below
  return bytes;
}

TEST(Zero3, BetweenStepsEachRankHoldsItsShardsOnly) {
  std::mutex mutex;
  int64_t total = 0;
  for (bool prefetch : {true, false}) {
    total = 0;
    comm::run_thread_ranks(3, [&](Communicator& comm) {
      auto model = three_units();
      Zero3Options options;
      options.prefetch = prefetch;
      Zero3 zero(comm, model, adam(torch::optim::AdamOptions(0.01)), options);
      ASSERT_EQ(zero.units(), 3);
      EXPECT_EQ(zero.unit_name(1), "2.weight");
      auto none_whole = [&] {
        for (int u = 0; u < zero.units(); ++u) EXPECT_FALSE(zero.gathered(u)) << "unit " << u;
        EXPECT_EQ(held_parameter_bytes(*model), 0);
      };
      none_whole();
      zero.zero_grad();
      at::Tensor loss = zero.forward(at::ones({2, 8})).sum();
      none_whole();  // freed after each unit's forward
      loss.backward();
      none_whole();  // freed after each unit's backward
      for (const auto& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
      const int64_t mine = zero.layout().shard_numel(comm.rank());
      EXPECT_EQ(zero.sharded().shard_grad().numel(), mine);
      EXPECT_GT(zero.sharded().shard_grad().abs().sum().item<double>(), 0.0);
      zero.step();
      int64_t state_numel = 0;  // Adam's moments, for the chunks only
      for (const auto& [key, state] : zero.sharded().optimizer().state())
        state_numel += static_cast<torch::optim::AdamParamState&>(*state).exp_avg().numel();
      EXPECT_EQ(state_numel, mine);

      // Forward gathers every unit once, backward once more, and each unit
      // is reduce-scattered once: 2 x 501 x 4 bytes gathered, 501 x 4 reduced.
      const Zero3Stats stats = zero.stats();
      EXPECT_EQ(stats.all_gathers, 2 * 3);
      EXPECT_EQ(stats.gathered_bytes, 2 * 501 * 4);
      EXPECT_EQ(stats.reduce_scatters, 3);
      EXPECT_EQ(stats.reduced_bytes, 501 * 4);
      EXPECT_EQ(stats.synced_steps, 1);
      // Prefetch holds the next unit while one computes; without it, one at a time.
      EXPECT_EQ(stats.max_gathered_units, prefetch ? 2 : 1);
      std::lock_guard<std::mutex> lock(mutex);
      total += mine;
    });
    EXPECT_EQ(total, 501);
  }
}

// Evaluation under no_grad: gathered and freed unit by unit, no hooks, and
// the same output as the whole model.
TEST(Zero3, ForwardWithoutGradMatchesTheWholeModel) {
  comm::run_thread_ranks(2, [&](Communicator& comm) {
    auto model = three_units();
    Zero3 zero(comm, model, sgd(torch::optim::SGDOptions(0.1)));
    auto reference = three_units();  // rank 0's weights, whole
    {
      torch::NoGradGuard no_grad;
      const std::vector<at::Tensor> full = zero.full_parameters();
      for (size_t i = 0; i < full.size(); ++i) reference->parameters()[i].copy_(full[i]);
    }
    const at::Tensor x = at::linspace(-1, 1, 24).reshape({3, 8});
    torch::NoGradGuard no_grad;
    const at::Tensor expected = reference->forward(x);
    EXPECT_TRUE(at::allclose(zero.forward(x), expected, 1e-6, 1e-6));
    for (int u = 0; u < zero.units(); ++u) EXPECT_FALSE(zero.gathered(u));
  });
}

// whole_parameters(), FSDP's summon_full_params: inside it the model's own
// parameters are the whole values (those full_parameters() gathers), a
// forward costs no traffic and gives the sharded forward's output, values
// loaded into the parameters reach every rank's shard when it ends, and a
// step inside it is refused.
TEST(Zero3, WholeParametersReadEvaluateAndLoad) {
  comm::run_thread_ranks(3, [&](Communicator& comm) {
    auto model = three_units();
    Zero3 zero(comm, model, sgd(torch::optim::SGDOptions(0.1)));
    const at::Tensor x = at::linspace(-1, 1, 24).reshape({3, 8});
    torch::NoGradGuard no_grad;
    const at::Tensor sharded_output = zero.forward(x);
    const std::vector<at::Tensor> full = zero.full_parameters();
    std::vector<at::Tensor> loaded;
    {
      auto whole = zero.whole_parameters();
      for (int u = 0; u < zero.units(); ++u) EXPECT_TRUE(zero.gathered(u)) << "unit " << u;
      const auto params = model->parameters();
      ASSERT_EQ(params.size(), full.size());
      for (size_t i = 0; i < full.size(); ++i) EXPECT_TRUE(at::equal(params[i], full[i])) << "parameter " << i;
      const int64_t gathers = zero.stats().all_gathers;
      EXPECT_TRUE(at::equal(zero.forward(x), sharded_output));
      EXPECT_EQ(zero.stats().all_gathers, gathers) << "no traffic while whole";
      EXPECT_THROW(zero.step(), std::logic_error);
      for (size_t i = 0; i < params.size(); ++i) {  // what a checkpoint would load, the same on every rank
        loaded.push_back(at::full_like(params[i], 0.01 * static_cast<double>(i + 1)));
        params[i].copy_(loaded.back());
      }
    }
    for (int u = 0; u < zero.units(); ++u) EXPECT_FALSE(zero.gathered(u)) << "unit " << u;
    const std::vector<at::Tensor> after = zero.full_parameters();
    for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(at::equal(after[i], loaded[i])) << "parameter " << i;
  });
}

// A pipeline stage's use: m forwards before their backwards (GPipe), the
// backwards in reverse order, all but the last under no_sync(). Each
// forward and backward gathers and frees unit by unit; the gradient
// reduce-scattered at the end is the sum over the microbatches, as the
// whole model's on the whole batch; and nothing is left whole.
TEST(Zero3, SeveralForwardsBeforeTheirBackwardsLikeAPipelineStage) {
  constexpr int kMicro = 3;
  comm::run_thread_ranks(2, [&](Communicator& comm) {
    auto model = three_units();
    Zero3 zero(comm, model, sgd(torch::optim::SGDOptions(0.1)));
    auto reference = three_units();
    {
      torch::NoGradGuard no_grad;
      const std::vector<at::Tensor> full = zero.full_parameters();
      for (size_t i = 0; i < full.size(); ++i) reference->parameters()[i].copy_(full[i]);
    }
    // (6, 8) per rank, rows differ by rank; microbatches of 2 rows.
    const at::Tensor x = at::linspace(-1, 1, 48).reshape({6, 8}) * (1.0 + comm.rank());
    zero.zero_grad();
    std::vector<at::Tensor> losses;
    for (int k = 0; k < kMicro; ++k) losses.push_back(zero.forward(x.narrow(0, 2 * k, 2)).pow(2).sum());
    for (int k = kMicro - 1; k >= 0; --k) {
      std::optional<Zero3::NoSync> guard;
      if (k > 0) guard.emplace(zero.no_sync());
      losses[static_cast<size_t>(k)].backward();
    }
    for (int u = 0; u < zero.units(); ++u) EXPECT_FALSE(zero.gathered(u)) << "unit " << u;
    EXPECT_EQ(zero.stats().synced_steps, 1);
    EXPECT_EQ(zero.stats().reduce_scatters, zero.units()) << "one reduce-scatter per unit, for the summed gradient";

    // The reference: both ranks' inputs on one process, mean over ranks of the summed losses.
    at::Tensor both = at::cat({at::linspace(-1, 1, 48).reshape({6, 8}), at::linspace(-1, 1, 48).reshape({6, 8}) * 2.0});
    (reference->forward(both).pow(2).sum() / comm.size()).backward();
    std::vector<at::Tensor> grads;
    for (const auto& p : reference->parameters()) grads.push_back(p.grad().reshape({-1}));
    const at::Tensor expected = at::cat(grads);  // (501,) registration order = unit order
    std::vector<at::Tensor> my_chunks;
    int64_t unit_start = 0;
    for (int u = 0; u < zero.units(); ++u) {
      const collectives::Range chunk = zero.layout().chunk(u, comm.rank());
      my_chunks.push_back(expected.narrow(0, unit_start + chunk.offset, chunk.count));
      unit_start += zero.layout().plan.buckets[static_cast<size_t>(u)].numel;
    }
    EXPECT_TRUE(at::allclose(zero.sharded().shard_grad(), at::cat(my_chunks), 1e-5, 1e-6));
  });
}

// The prefetch overlaps: unit k+1's all-gather is queued on the comm
// thread before unit k's forward begins (its span: "forwards begun at
// submit" = k), so it can run while unit k computes; without prefetch it is
// queued when unit k+1 needs it, after unit k's forward (k + 1). A cause
// read from the record, which a comm thread delayed by a busy machine
// cannot change; how many all-gathers began before the previous unit's
// forward ended is printed, not checked. Six 256x256 layers on 512 rows.
TEST(Zero3Trace, PrefetchRunsUnderThePreviousUnitsForward) {
  const std::string begun_key = "forwards begun at submit";
  for (bool prefetch : {true, false}) {
    comm::CommOptions options;
    auto sink = test_support::record_into(options);
    comm::run_thread_ranks(
        2,
        [&](Communicator& comm) {
          torch::nn::Sequential model = models::square_mlp(6, 256, models::Activation::kTanh);
          Zero3Options zo;
          zo.prefetch = prefetch;
          Zero3 zero(comm, model, sgd(torch::optim::SGDOptions(0.01)), zo);
          zero.forward(at::randn({512, 256})).pow(2).mean().backward();
          zero.step();
        },
        options);
    for (int rank = 0; rank < 2; ++rank) {
      std::map<std::string, trace::Event> forward, gather;  // by unit
      int reduce_scatters = 0;
      for (const auto& e : sink->events()) {
        if (e.rank != rank) continue;
        if (e.category == "zero_forward") forward[e.arg("unit")] = e;
        if (e.category == "zero_all_gather" && e.name.find("(forward)") != std::string::npos) gather[e.arg("bucket")] = e;
        reduce_scatters += e.category == "zero_reduce_scatter";
      }
      ASSERT_EQ(forward.size(), 6u);
      ASSERT_EQ(gather.size(), 6u);
      EXPECT_EQ(reduce_scatters, 6);
      int began_under_forward = 0;
      for (int k = 0; k + 1 < 6; ++k) {
        const trace::Event& g = gather[std::to_string(k + 1)];
        const std::string begun = g.arg(begun_key);
        if (prefetch)
          EXPECT_EQ(begun, std::to_string(k))
              << "rank " << rank << ": unit " << k + 1 << "'s all-gather was queued after unit " << k
              << "'s forward began (" << begun_key << ": '" << begun << "')";
        else
          EXPECT_EQ(begun, std::to_string(k + 1)) << "rank " << rank << ", unit " << k + 1;
        began_under_forward += g.begin_us < forward[std::to_string(k)].end_us;
      }
      std::cout << (prefetch ? "prefetch" : "no prefetch") << ", rank " << rank << ": " << began_under_forward
                << " of 5 all-gathers began before the previous unit's forward ended" << std::endl;
    }
  }
}

// The memory a step holds goes into the trace as counter samples: one
// before the shard steps and one after, each equal to what memory()
// measures then (after: Adam's state exists, 8 bytes per shard element).
TEST(Zero3Trace, StepRecordsMemoryCounterSamples) {
  comm::CommOptions options;
  auto sink = test_support::record_into(options);
  std::vector<MemoryUse> after(2);
  comm::run_thread_ranks(
      2,
      [&](Communicator& comm) {
        auto model = three_units();
        Zero3 zero(comm, model, adam(torch::optim::AdamOptions(0.01)));
        zero.forward(at::ones({2, 8})).sum().backward();
        zero.step();
        after[static_cast<size_t>(comm.rank())] = zero.sharded().memory();
      },
      options);
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<trace::Event> samples;
    for (const auto& e : sink->events())
      if (e.rank == rank && e.is_counter() && e.name == memory_counter("ZeRO-3")) samples.push_back(e);
    ASSERT_EQ(samples.size(), 2u) << "rank " << rank;
    // Beside each measured sample, the paper's: 16 Psi / p bytes for Adam, all sharded.
    int64_t psi = 0;
    for (const auto& p : three_units()->parameters()) psi += p.numel();
    int accounted = 0;
    for (const auto& e : sink->events())
      if (e.rank == rank && e.is_counter() && e.name == accounting_counter("ZeRO-3")) {
        ++accounted;
        EXPECT_EQ(e.arg("parameters"), std::to_string(4 * psi / 2));
        EXPECT_EQ(e.arg("gradients"), std::to_string(4 * psi / 2));
        EXPECT_EQ(e.arg("optimizer state"), std::to_string(8 * psi / 2));
        EXPECT_EQ(e.arg("buffers"), "0");
      }
    EXPECT_EQ(accounted, 2) << "rank " << rank;
    const MemoryUse& m = after[static_cast<size_t>(rank)];
    EXPECT_EQ(samples[0].arg("optimizer state"), "0");
    EXPECT_EQ(samples[1].arg("parameters"), std::to_string(m.parameters));
    EXPECT_EQ(samples[1].arg("gradients"), std::to_string(m.gradients));
    EXPECT_EQ(samples[1].arg("optimizer state"), std::to_string(m.optimizer_state));
    EXPECT_EQ(m.optimizer_state, 2 * m.parameters);
  }
}

TEST(Zero3, StepWithAnUnreducedGradientIsRefused) {
  comm::run_thread_ranks(2, [&](Communicator& comm) {
    auto model = three_units();
    Zero3 zero(comm, model, sgd(torch::optim::SGDOptions(0.1)));
    {
      auto guard = zero.no_sync();
      zero.forward(at::ones({2, 8})).sum().backward();
    }
    try {
      zero.step();
      ADD_FAILURE() << "stepped with a gradient that was never reduce-scattered";
    } catch (const comm::CommError& e) {
      EXPECT_NE(std::string(e.what()).find("never reduce-scattered"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("ZeRO-3: parameter '"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace distlab::zero
