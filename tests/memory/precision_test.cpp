// Mixed precision (memory/precision.hpp) and the loss scaler
// (memory/loss_scaler.hpp), each against an independent reference:
//   - inside the guard the products run in bfloat16 and the norms in
//     float32; the parameters and their gradients stay float32; outside it
//     nothing changes;
//   - gradients accumulate in float32 across micro-steps: .grad after four
//     is the float32 sum of each micro-step's gradient computed alone (and
//     not the bfloat16 sum); DDP synchronises on the last micro-step only
//     and gives the average of the two ranks' float32 sums; SGD steps the
//     float32 parameters from them;
//   - a recomputed region runs in the precision of its forward;
//   - the scaler: an inf or a NaN skips the step and halves the scale, the
//     scale doubles after the interval's clean steps, and scaling by a power
//     of two gives the plain gradients bit for bit; under fp16 (emulated) a
//     loss times 1e-9 loses every gradient, which the scaler keeps, float32's
//     to within a float16 step.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "comm/threads_backend.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "memory/loss_scaler.hpp"
#include "memory/precision.hpp"
#include "memory/recompute.hpp"
#include "support/differences.hpp"

namespace {

using distlab::memory::ComputeIn;
using distlab::memory::LossScaler;
using distlab::memory::LossScalerOptions;
using distlab::memory::Precision;
using distlab::test_support::largest_difference;

constexpr auto kCpu = c10::DeviceType::CPU;

std::vector<at::Tensor> grads_of(torch::nn::Module& m) {
  std::vector<at::Tensor> g;
  for (const auto& p : m.parameters()) g.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  return g;
}

bool all_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].defined() || !b[i].defined() || !at::equal(a[i], b[i])) return false;
  return true;
}

TEST(Precision, NamesRoundTripAndBadOnesAreRefused) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16})
    EXPECT_EQ(distlab::memory::precision_from(distlab::memory::to_string(p)), p);
  EXPECT_EQ(distlab::memory::compute_dtype(Precision::kBf16), at::kBFloat16);
  EXPECT_EQ(distlab::memory::compute_dtype(Precision::kFp16), at::kHalf);
  try {
    distlab::memory::precision_from("fp8");
    FAIL() << "fp8 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fp32, bf16, fp16"), std::string::npos) << e.what();
  }
  {
    ComputeIn guard(Precision::kFp16, kCpu);  // emulated on the CPU (fp16_emulation_test.cpp)
    EXPECT_FALSE(distlab::memory::AutocastState::current().cpu) << "fp16 on the CPU turned autocast on";
    EXPECT_TRUE(distlab::memory::AutocastState::current().fp16_emulated);
  }
  EXPECT_FALSE(distlab::memory::AutocastState::current().fp16_emulated) << "the guard left the emulation on";
}

// One TransformerEncoderLayer (the capstone's) in bfloat16 and in float32.
TEST(Precision, ProductsRunInBf16NormsParametersAndGradientsInFloat32) {
  torch::manual_seed(5);
  torch::nn::TransformerEncoderLayer layer(
      torch::nn::TransformerEncoderLayerOptions(32, 2).dim_feedforward(64).dropout(0.0));
  const at::Tensor x = torch::randn({7, 3, 32});
  at::Tensor mixed, product;
  {
    ComputeIn guard(Precision::kBf16, kCpu);
    product = layer->linear1(x);
    mixed = layer(x);
  }
  EXPECT_EQ(product.scalar_type(), at::kBFloat16) << "the product ran in " << product.scalar_type();
  EXPECT_EQ(mixed.scalar_type(), at::kFloat) << "the layer ends with a norm, in float32";
  EXPECT_EQ(layer->linear1(x).scalar_type(), at::kFloat) << "the guard left autocast on";
  mixed.pow(2).sum().backward();
  for (const auto& p : layer->named_parameters()) {
    EXPECT_EQ(p.value().scalar_type(), at::kFloat) << p.key();
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_EQ(p.value().grad().scalar_type(), at::kFloat) << p.key();
  }
  // bfloat16 keeps 8 significant bits: near float32's result, not equal to it.
  const double d = largest_difference(mixed, layer(x));
  EXPECT_TRUE(distlab::test_support::within(d, 0.1)) << d;
  EXPECT_TRUE(distlab::test_support::exceeds(d, 1e-4)) << "no rounding to bfloat16 seen: " << d;
}

// A small MLP, four micro-steps of different rows; weights and data from a
// generator of its own (thread ranks build theirs at the same time).
struct Micro {
  torch::nn::Sequential model;
  at::Tensor x, y;
  Micro() {
    model = torch::nn::Sequential(torch::nn::Linear(16, 64), torch::nn::ReLU(), torch::nn::Linear(64, 4));
    at::Generator g = at::detail::createCPUGenerator(9);
    at::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.copy_(at::randn(p.sizes(), g) * 0.3);
    x = at::randn({4 * 8, 16}, g);
    y = at::randn({4 * 8, 4}, g);
  }
  at::Tensor loss(int micro, int rank = 0, int ranks = 1) {
    const int64_t rows = 8 / ranks;
    ComputeIn guard(Precision::kBf16, kCpu);
    const at::Tensor out = model->forward(x.narrow(0, micro * 8 + rank * rows, rows));
    return torch::mse_loss(out.to(at::kFloat), y.narrow(0, micro * 8 + rank * rows, rows));
  }
};

TEST(Precision, GradientsAccumulateInFloat32AcrossMicroSteps) {
  Micro m;
  std::vector<std::vector<at::Tensor>> each;  // each micro-step's gradients, alone
  for (int i = 0; i < 4; ++i) {
    distlab::compat::zero_grad(*m.model);
    m.loss(i).backward();
    each.push_back(grads_of(*m.model));
  }
  distlab::compat::zero_grad(*m.model);
  for (int i = 0; i < 4; ++i) m.loss(i).backward();  // accumulated in .grad
  const std::vector<at::Tensor> accumulated = grads_of(*m.model);
  std::vector<at::Tensor> sum32, sum16;
  for (size_t p = 0; p < accumulated.size(); ++p) {
    ASSERT_EQ(accumulated[p].scalar_type(), at::kFloat);
    at::Tensor s = each[0][p].clone(), h = each[0][p].to(at::kBFloat16);
    for (int i = 1; i < 4; ++i) s += each[i][p], h += each[i][p].to(at::kBFloat16);
    sum32.push_back(s);
    sum16.push_back(h.to(at::kFloat));
  }
  EXPECT_TRUE(all_equal(accumulated, sum32)) << "not the float32 sum of the micro-steps' gradients";
  EXPECT_FALSE(all_equal(accumulated, sum16)) << "the bfloat16 sum is the same: the check cannot tell them apart";

  // SGD steps the float32 parameters from the float32 gradients.
  std::vector<at::Tensor> before;
  for (const auto& p : m.model->parameters()) before.push_back(p.detach().clone());
  torch::optim::SGD(m.model->parameters(), torch::optim::SGDOptions(0.1)).step();
  const auto after = m.model->parameters();
  for (size_t p = 0; p < after.size(); ++p) {
    EXPECT_EQ(after[p].scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(after[p].detach(), before[p].add(accumulated[p], -0.1))) << "parameter " << p;  // p - lr g
  }
}

TEST(Precision, DdpSynchronisesTheFloat32SumOnTheLastMicroStepOnly) {
  // Each rank's float32 sum over its rows of four micro-steps, computed alone.
  std::vector<std::vector<at::Tensor>> local(2);
  for (int r = 0; r < 2; ++r) {
    Micro m;
    for (int i = 0; i < 4; ++i) m.loss(i, r, 2).backward();
    local[r] = grads_of(*m.model);
  }
  std::mutex mutex;
  std::vector<std::vector<at::Tensor>> got(2);
  std::vector<distlab::ddp::ReducerStats> stats(2);
  distlab::comm::run_thread_ranks(2, [&](distlab::comm::Communicator& comm) {
    Micro m;
    distlab::ddp::DistributedDataParallel ddp(comm, m.model.ptr());
    for (int i = 0; i < 3; ++i) {
      auto guard = ddp.no_sync();
      ddp.forward([&] { return m.loss(i, comm.rank(), 2); }).backward();
    }
    ddp.forward([&] { return m.loss(3, comm.rank(), 2); }).backward();
    std::lock_guard<std::mutex> lock(mutex);
    got[comm.rank()] = grads_of(*m.model);
    stats[comm.rank()] = ddp.stats();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(stats[r].local_steps, 3) << "rank " << r;
    EXPECT_EQ(stats[r].synced_steps, 1) << "rank " << r;
    for (size_t p = 0; p < local[0].size(); ++p) {
      ASSERT_EQ(got[r][p].scalar_type(), at::kFloat);
      EXPECT_TRUE(at::equal(got[r][p], local[0][p] / 2 + local[1][p] / 2)) << "rank " << r << " parameter " << p;
    }
  }
}

TEST(Precision, ARecomputedRegionRunsInItsForwardsPrecision) {
  auto run = [](bool recompute, Precision precision) {
    torch::manual_seed(21);
    torch::nn::TransformerEncoderLayer layer(
        torch::nn::TransformerEncoderLayerOptions(32, 2).dim_feedforward(64).dropout(0.3));
    const at::Tensor x = torch::randn({6, 2, 32}).requires_grad_(true);
    torch::manual_seed(22);
    at::Tensor out;
    {
      ComputeIn guard(precision, kCpu);
      out = recompute ? distlab::memory::checkpoint([&](const at::Tensor& h) { return layer(h); }, x) : layer(x);
    }
    out.pow(2).sum().backward();  // outside the guard, as the trainer's backward
    std::vector<at::Tensor> g = grads_of(*layer);
    g.push_back(x.grad().clone());
    g.push_back(out.detach());
    return g;
  };
  const auto plain = run(false, Precision::kBf16);
  EXPECT_TRUE(all_equal(run(true, Precision::kBf16), plain)) << "recomputed in another precision or with other masks";
  EXPECT_FALSE(all_equal(run(false, Precision::kFp32), plain)) << "float32 gives the same: the check cannot tell";
}

TEST(LossScaler, AnOverflowSkipsTheStepAndBacksOffCleanStepsGrowIt) {
  LossScalerOptions o;
  o.init_scale = 1024, o.growth_interval = 3;
  LossScaler scaler(o);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(LossScaler::any_not_finite({torch::tensor({1.0f, float(inf)})}));
  EXPECT_TRUE(LossScaler::any_not_finite({torch::ones({2}), torch::tensor({std::nanf("")})}));
  EXPECT_FALSE(LossScaler::any_not_finite({torch::ones({3}), at::Tensor(), torch::ones({0})}));

  EXPECT_TRUE(scaler.update(false));
  EXPECT_TRUE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 1024);
  EXPECT_FALSE(scaler.update(true)) << "a step with an inf was taken";
  EXPECT_EQ(scaler.scale(), 512);
  EXPECT_EQ(scaler.growth_tracker(), 0) << "an overflow starts the count again";
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 512) << "grew before the interval";
  EXPECT_TRUE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 1024) << "did not grow after 3 clean steps";
  EXPECT_EQ(scaler.skipped_steps(), 1);

  const auto options = [](double init, double growth, double backoff, int64_t interval) {
    LossScalerOptions b;
    b.init_scale = init, b.growth_factor = growth, b.backoff_factor = backoff, b.growth_interval = interval;
    return b;
  };
  for (const LossScalerOptions& bad :
       {options(0, 2, 0.5, 10), options(1, 2, 1, 10), options(1, 1, 0.5, 10), options(1, 2, 0.5, 0)})
    EXPECT_THROW(LossScaler{bad}, std::invalid_argument);
}

TEST(LossScaler, ScalingByAPowerOfTwoGivesThePlainGradientsBitForBit) {
  Micro plain, scaled;
  plain.loss(0).backward();
  LossScaler scaler;  // 2^16
  scaler.scale_loss(scaled.loss(0)).backward();
  const std::vector<at::Tensor> big = grads_of(*scaled.model);
  EXPECT_FALSE(all_equal(big, grads_of(*plain.model)));
  std::vector<at::Tensor> live;
  for (const auto& p : scaled.model->parameters()) live.push_back(p.grad());
  scaler.unscale(live);
  EXPECT_TRUE(all_equal(grads_of(*scaled.model), grads_of(*plain.model)));
  for (size_t p = 0; p < big.size(); ++p) EXPECT_TRUE(at::equal(big[p], live[p] * 65536.0)) << p;
}

// Why fp16 needs the scaler, through DistLab's guard and scaler: the small
// MLP's loss times 1e-9, which puts its parameters' gradients near 1e-9 and
// the gradient reaching its last product near 1e-10, below float16's
// smallest number (2^-24, 6e-8). Under ComputeIn(fp16) (emulated on the
// CPU: every product's operands, result and gradients rounded to float16)
// that gradient rounds to zero, and every parameter's gradient with it. The
// loss scaler at 2^24 lifts it to about 2e-3, inside float16's normal range
// (from 2^-14), where float16 keeps 11 significant bits; unscaled, every
// gradient is float32's to within one float16 step at the size of the
// parameter's largest gradient (2^-10 of it: the step from 1 to the next
// float16 number). bfloat16 has float32's exponent range:
// under ComputeIn(bf16) no gradient vanishes without a scaler.
TEST(LossScaler, Float16FlushesTheGradientsOfATinyLossToZeroTheScalerKeepsThem) {
  const auto backward = [](Precision precision, LossScaler* scaler) {
    Micro m;
    at::Tensor loss;
    {
      ComputeIn guard(precision, kCpu);
      loss = torch::mse_loss(m.model->forward(m.x.narrow(0, 0, 8)).to(at::kFloat), m.y.narrow(0, 0, 8)) * 1e-9;
    }
    (scaler != nullptr ? scaler->scale_loss(loss) : loss).backward();  // outside the guard, as the trainer's
    std::vector<at::Tensor> live;
    for (const auto& p : m.model->parameters()) live.push_back(p.grad());
    if (scaler != nullptr) {
      EXPECT_FALSE(LossScaler::any_not_finite(live)) << "the scaled gradients overflowed";
      scaler->unscale(live);
    }
    return grads_of(*m.model);
  };
  const std::vector<at::Tensor> fp32 = backward(Precision::kFp32, nullptr);
  const std::vector<at::Tensor> fp16 = backward(Precision::kFp16, nullptr);
  LossScalerOptions o;
  o.init_scale = 16777216.0;  // 2^24
  LossScaler scaler(o);
  const std::vector<at::Tensor> scaled = backward(Precision::kFp16, &scaler);
  const std::vector<at::Tensor> bf16 = backward(Precision::kBf16, nullptr);
  constexpr double kFloat16Step = 1.0 / 1024;  // 2^-10
  ASSERT_EQ(fp32.size(), 4u);
  for (size_t p = 0; p < fp32.size(); ++p) {
    const double largest = fp32[p].abs().max().item<double>();
    const int64_t nonzero = fp32[p].count_nonzero().item<int64_t>();
    ASSERT_TRUE(distlab::test_support::exceeds(largest, 0)) << "parameter " << p << ": no gradient to lose";
    ASSERT_TRUE(fp16[p].defined() && scaled[p].defined() && bf16[p].defined()) << "parameter " << p;
    EXPECT_EQ(fp16[p].count_nonzero().item<int64_t>(), 0) << "parameter " << p << ": float16 kept a gradient";
    EXPECT_EQ(scaled[p].count_nonzero().item<int64_t>(), nonzero) << "parameter " << p << ": the scaler lost some";
    const double off = largest_difference(scaled[p], fp32[p]);
    EXPECT_TRUE(distlab::test_support::within(off, kFloat16Step * largest))
        << "parameter " << p << ": " << off / largest << " of its largest gradient from float32's";
    EXPECT_EQ(bf16[p].count_nonzero().item<int64_t>(), nonzero) << "parameter " << p << ": bfloat16 lost some";
  }
}

}  // namespace
