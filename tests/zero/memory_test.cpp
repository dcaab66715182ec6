// Memory, measured: what each stage really holds against the ZeRO paper's
// accounting, and the allocator meter against tensors of known size.
#include <gtest/gtest.h>
#include <c10/core/CPUAllocator.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/types.h>

#include <array>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "comm/threads_backend.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "memory/allocator_meter.hpp"
#include "zero/memory.hpp"
#include "zero/zero1.hpp"
#include "zero/zero2.hpp"
#include "zero/zero3.hpp"

namespace distlab::zero {
namespace {

using comm::Communicator;

// Three units of 64x64 + 64: 3 x 4160 = 12480 parameters.
constexpr int64_t kPsi = 3 * (64 * 64 + 64);

torch::nn::Sequential model_of_three_units() {
  return torch::nn::Sequential(torch::nn::Linear(64, 64), torch::nn::Tanh(), torch::nn::Linear(64, 64),
                               torch::nn::Tanh(), torch::nn::Linear(64, 64));
}

// One Adam step with `stage` on this rank; what it holds after the step
// (parameters, the gradients backward left, Adam's two moments).
MemoryUse one_step(Communicator& comm, Stage stage) {
  auto model = model_of_three_units();
  const at::Tensor x = at::ones({4, 64});
  const auto adam = zero::adam(torch::optim::AdamOptions(1e-3));
  switch (stage) {
    case Stage::kDdp: {
      ddp::DistributedDataParallel ddp(comm, model.ptr());
      auto optimizer = adam(model->parameters());
      ddp.forward([&] { return model->forward(x).sum(); }).backward();
      optimizer->step();
      return measure_memory(model->parameters(), optimizer.get());
    }
    case Stage::kZero1: {
      Zero1 zero(comm, *model, adam);
      model->forward(x).sum().backward();
      zero.step();
      return zero.sharded().memory();
    }
    case Stage::kZero2: {
      Zero2 zero(comm, *model, adam);
      model->forward(x).sum().backward();
      zero.step();
      return zero.sharded().memory();
    }
    case Stage::kZero3: {
      Zero3 zero(comm, model, adam);
      zero.forward(x).sum().backward();
      zero.step();
      return zero.sharded().memory();
    }
  }
  return {};
}

// On 4 ranks, each category within a few elements of the accounting (the
// shards of each unit differ by at most one element); ZeRO-1's gradients are
// exactly the accounting's, Psi: the shard's reduced gradient is a view of
// the whole one. The totals fall from DDP to ZeRO-1 to ZeRO-2 to ZeRO-3.
TEST(ZeroMemory, MeasuredAgainstTheAccountingOnFourRanks) {
  constexpr int kRanks = 4;
  const std::array<Stage, 4> stages = {Stage::kDdp, Stage::kZero1, Stage::kZero2, Stage::kZero3};
  std::array<std::array<MemoryUse, kRanks>, 4> measured;
  comm::run_thread_ranks(kRanks, [&](Communicator& comm) {
    for (size_t s = 0; s < stages.size(); ++s) measured[s][static_cast<size_t>(comm.rank())] = one_step(comm, stages[s]);
  });
  const int64_t slack = 4 * 3;  // one element per unit
  for (size_t s = 0; s < stages.size(); ++s) {
    const MemoryUse expected = accounting(stages[s], kPsi, kRanks);
    for (int r = 0; r < kRanks; ++r) {
      const MemoryUse& m = measured[s][static_cast<size_t>(r)];
      const std::string where = std::string(to_string(stages[s])) + ", rank " + std::to_string(r);
      EXPECT_NEAR(m.parameters, expected.parameters, slack) << where;
      EXPECT_NEAR(m.gradients, expected.gradients, slack) << where;
      if (stages[s] == Stage::kZero1) EXPECT_EQ(m.gradients, expected.gradients) << where;
      EXPECT_NEAR(m.optimizer_state, expected.optimizer_state, 2 * slack) << where;
      if (s > 0) EXPECT_LT(m.model_states(), measured[s - 1][static_cast<size_t>(r)].model_states()) << where;
    }
    std::cout << to_string(stages[s]) << ": rank 0 holds " << measured[s][0].parameters << " + "
              << measured[s][0].gradients << " + " << measured[s][0].optimizer_state << " bytes (accounting "
              << accounting(stages[s], kPsi, kRanks).parameters << " + " << accounting(stages[s], kPsi, kRanks).gradients
              << " + " << accounting(stages[s], kPsi, kRanks).optimizer_state << ")" << std::endl;
  }
}

// The buffers that come and go during a step, at their most: ZeRO-2's
// buckets (here one per layer) and ZeRO-3's flattened unit gradients live
// from backward to their reduce-scatter, one in flight at most: the
// previous one lands before the next is made, so the peak is one layer's
// whatever the comm thread's pace (rank 1 starts its backward late, so
// rank 0's reduce-scatters wait for it: without the bound rank 0 would
// make all three buckets first). ZeRO-1 reduces in place and has none.
// Noted activations are kept at their largest; reset() starts again from
// what is held now (nothing).
TEST(ZeroMemory, PassingBuffersAndActivationsAtTheirPeak) {
  comm::run_thread_ranks(2, [&](Communicator& comm) {
    const at::Tensor x = at::ones({4, 64});
    const auto adam = zero::adam(torch::optim::AdamOptions(1e-3));
    const int64_t layer = (64 * 64 + 64) * 4;
    {
      auto model = model_of_three_units();
      Zero1 zero(comm, *model, adam);
      model->forward(x).sum().backward();
      zero.step();
      EXPECT_EQ(zero.sharded().memory().buffers, 0);
    }
    {
      auto model = model_of_three_units();
      ZeroOptions options;
      options.bucket_cap_bytes = options.first_bucket_bytes = layer;
      Zero2 zero(comm, *model, adam, options);
      ASSERT_EQ(zero.layout().buckets(), 3);
      const at::Tensor loss = model->forward(x).sum();
      if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      loss.backward();
      zero.step();
      EXPECT_EQ(zero.sharded().memory().buffers, layer) << "rank " << comm.rank();
      zero.sharded().peaks().note_activations(5000);
      zero.sharded().peaks().note_activations(3000);
      EXPECT_EQ(zero.sharded().memory().activations, 5000);
      zero.sharded().peaks().reset();
      EXPECT_EQ(zero.sharded().memory().buffers, 0);
      EXPECT_EQ(zero.sharded().memory().activations, 0);
    }
    {
      auto model = model_of_three_units();
      Zero3 zero(comm, model, adam);
      zero.forward(x).sum().backward();
      zero.step();
      EXPECT_EQ(zero.sharded().memory().buffers, layer) << "rank " << comm.rank();
    }
  });
}

TEST(ZeroMemory, StorageCounterCountsSharedStorageOnce) {
  const at::Tensor flat = at::zeros({100});
  StorageCounter counter;
  EXPECT_EQ(counter.add(flat.narrow(0, 0, 10)), 400);
  EXPECT_EQ(counter.add(flat.narrow(0, 50, 50)), 0);
  EXPECT_EQ(counter.add(at::Tensor()), 0);
  EXPECT_EQ(counter.add(at::zeros({3}, at::kDouble)), 24);
}

// The meter sees what LibTorch allocates and frees; the activations of a
// forward pass are the tensors autograd saved. For Linear -> Tanh pairs on
// (rows, width): Tanh keeps its output (its backward needs tanh(y)), which is
// also what the next Linear keeps as its input, so one (rows, width) tensor
// per pair; the Linear's output y lives only until Tanh has read it, so at
// the peak one more is alive: pairs + 1 tensors.
TEST(ZeroMemory, AllocatorMeterSeesAllocationsAndTheForwardPeak) {
  memory::AllocatorMeter& meter = memory::AllocatorMeter::install();
  const int64_t before = meter.allocated();
  {
    const at::Tensor big = at::empty({1 << 20});  // 4 MiB
    EXPECT_GE(meter.allocated() - before, 4 << 20);
  }
  EXPECT_LT(meter.allocated() - before, 4 << 20);

  constexpr int64_t kRows = 256, kWidth = 512, kPairs = 4;
  torch::nn::Sequential model;
  for (int i = 0; i < kPairs; ++i) {
    model->push_back(torch::nn::Linear(kWidth, kWidth));
    model->push_back(torch::nn::Tanh());
  }
  const at::Tensor x = at::randn({kRows, kWidth});
  const int64_t start = meter.allocated();
  meter.reset_peak();
  at::Tensor loss = model->forward(x).sum();
  const int64_t activations = meter.peak() - start;
  const int64_t expected = (kPairs + 1) * kRows * kWidth * 4;
  EXPECT_GE(activations, expected);
  EXPECT_LE(activations, expected * 11 / 10);
  std::cout << "forward kept " << activations << " bytes; pairs + 1 tensors: " << expected << std::endl;
  loss.backward();
}

// With the meter installed, raw_allocate() and raw_deallocate() still work
// (some CPU kernels take scratch through them, gelu's among them) and are
// counted; gelu gives what it gives without the meter.
TEST(ZeroMemory, AllocatorMeterKeepsRawAllocationsWorking) {
  memory::AllocatorMeter& meter = memory::AllocatorMeter::install();
  const int64_t before = meter.allocated();
  c10::Allocator* cpu = c10::GetCPUAllocator();
  void* raw = cpu->raw_allocate(4096);
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(meter.allocated() - before, 4096);
  static_cast<char*>(raw)[4095] = 1;
  cpu->raw_deallocate(raw);
  EXPECT_EQ(meter.allocated(), before);

  {
    const at::Tensor x = at::linspace(-3, 3, 1 << 16);
    const at::Tensor by_hand = 0.5 * x * (1 + at::erf(x / std::sqrt(2.0)));
    EXPECT_LT((at::gelu(x) - by_hand).abs().max().item<double>(), 1e-6);
    EXPECT_GE(meter.allocated() - before, 2 * (4 << 16));  // x and by_hand, counted
  }
  EXPECT_EQ(meter.allocated(), before);  // and freed
}

}  // namespace
}  // namespace distlab::zero
