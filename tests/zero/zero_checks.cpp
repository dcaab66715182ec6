#include "zero_checks.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/types.h>

#include <cmath>
#include <sstream>

#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "support/differences.hpp"
#include "zero/naive_zero.hpp"
#include "zero/zero1.hpp"
#include "zero/zero2.hpp"
#include "zero/zero3.hpp"

namespace distlab::zero::testing {
namespace {

using collectives::Algorithm;

constexpr int64_t kRowsPerRank = 4;
constexpr int kSteps = 4;

struct Shape {
  const char* name;
  int64_t in, hidden1, hidden2, out;
};
constexpr Shape kWide{"wide", 8, 32, 32, 4};
constexpr Shape kOdd{"odd", 6, 7, 5, 1};

// Weights from a generator of its own, not the global one: thread ranks
// build models at the same time, and every rank must build the same one.
torch::nn::Sequential make_model(const Shape& s, uint64_t seed) {
  torch::nn::Sequential model(torch::nn::Linear(s.in, s.hidden1), torch::nn::Tanh(),
                              torch::nn::Linear(s.hidden1, s.hidden2), torch::nn::Tanh(),
                              torch::nn::Linear(s.hidden2, s.out));
  auto gen = at::detail::createCPUGenerator(seed);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.copy_((at::rand(p.sizes(), gen) * 2 - 1) * 0.4);
  return model;
}

struct Data {
  at::Tensor x, y;  // (rows, in), (rows, out)
};
Data make_data(const Shape& s, int64_t rows, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return {at::randn({rows, s.in}, gen, at::kFloat), at::randn({rows, s.out}, gen, at::kFloat)};
}

// All parameters in registration order: (n,).
at::Tensor flat(torch::nn::Module& model) {
  std::vector<at::Tensor> pieces;
  for (const auto& p : model.parameters()) pieces.push_back(p.detach().reshape({-1}));
  return at::cat(pieces).clone();
}

struct Setting {
  Shape shape;
  bool adam;
  double max_norm;  // 0: no clipping
  int micro;        // micro-steps per step (1: no accumulation)
};

enum class Flavor { kDdp, kNaive, kZero1, kZero2, kZero2EachMicro, kNaive3, kZero3, kZero3NoPrefetch, kZero3EachMicro };

struct Run {
  Flavor flavor;
  Algorithm algorithm;
  int64_t cap_bytes;  // 0: one bucket per parameter
};

std::string describe(const Setting& s, int ranks) {
  std::ostringstream out;
  out << s.shape.name << " model, " << (s.adam ? "Adam" : "SGD+momentum") << ", clip " << s.max_norm << ", "
      << s.micro << " micro-step(s), " << ranks << " ranks";
  return out.str();
}

std::string describe(const Run& run) {
  const char* names[] = {"DDP",
                         "naive ZeRO-1",
                         "ZeRO-1",
                         "ZeRO-2 (no_sync)",
                         "ZeRO-2 (reduce per micro-step)",
                         "naive ZeRO-3",
                         "ZeRO-3 (no_sync)",
                         "ZeRO-3 without prefetch (no_sync)",
                         "ZeRO-3 (reduce per micro-step)"};
  return std::string(names[static_cast<int>(run.flavor)]) + " " + collectives::to_string(run.algorithm) + " cap " +
         std::to_string(run.cap_bytes);
}

OptimizerFactory factory(const Setting& s) {
  if (s.adam) return adam(torch::optim::AdamOptions(0.01));
  return sgd(torch::optim::SGDOptions(0.1).momentum(0.9));
}

at::Tensor loss_of(torch::nn::Sequential& model, const at::Tensor& x, const at::Tensor& y) {
  return torch::nn::functional::mse_loss(model->forward(x), y);
}

struct Result {
  at::Tensor params;          // (n,) at the end
  std::vector<double> norms;  // gradient norm before clipping, per step (when clipping)
};

// One process on the whole batch: step s takes rows [s*b, (s+1)*b), b = micro * ranks * kRowsPerRank.
Result train_single(const Setting& s, const Data& data, int ranks) {
  auto model = make_model(s.shape, 7);
  auto optimizer = factory(s)(model->parameters());
  const int64_t b = s.micro * ranks * kRowsPerRank;
  Result result;
  for (int step = 0; step < kSteps; ++step) {
    compat::zero_grad(*optimizer);
    loss_of(model, data.x.narrow(0, step * b, b), data.y.narrow(0, step * b, b)).backward();
    if (s.max_norm > 0) result.norms.push_back(torch::nn::utils::clip_grad_norm_(model->parameters(), s.max_norm));
    optimizer->step();
  }
  result.params = flat(*model);
  return result;
}

// The same steps on `comm`: micro-step i of step s on rank r takes the
// kRowsPerRank rows at ((s * micro + i) * N + r) * kRowsPerRank, its loss
// divided by micro. Only rank 0 starts from the reference weights.
Result train(comm::Communicator& comm, const Setting& s, const Run& run, const Data& data) {
  auto model = make_model(s.shape, comm.rank() == 0 ? 7 : 1000 + static_cast<uint64_t>(comm.rank()));
  auto micro_loss = [&](int step, int i) {
    const int64_t first = ((step * s.micro + i) * comm.size() + comm.rank()) * kRowsPerRank;
    return loss_of(model, data.x.narrow(0, first, kRowsPerRank), data.y.narrow(0, first, kRowsPerRank)) / s.micro;
  };
  ZeroOptions options;
  options.algorithm = run.algorithm;
  options.bucket_cap_bytes = run.cap_bytes;
  options.first_bucket_bytes = run.cap_bytes / 2;
  Result result;
  if (run.flavor == Flavor::kDdp) {
    ddp::DistributedDataParallel ddp(comm, model.ptr());
    auto optimizer = factory(s)(model->parameters());
    for (int step = 0; step < kSteps; ++step) {
      compat::zero_grad(*optimizer);
      for (int i = 0; i < s.micro; ++i) {
        if (i < s.micro - 1) {
          auto guard = ddp.no_sync();
          ddp.forward([&] { return micro_loss(step, i); }).backward();
        } else {
          ddp.forward([&] { return micro_loss(step, i); }).backward();
        }
      }
      if (s.max_norm > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), s.max_norm);
      optimizer->step();
    }
  } else if (run.flavor == Flavor::kNaive) {
    NaiveZero1 zero(comm, *model, factory(s), run.algorithm, run.algorithm);
    for (int step = 0; step < kSteps; ++step) {
      zero.zero_grad();
      for (int i = 0; i < s.micro; ++i) micro_loss(step, i).backward();
      zero.step(s.max_norm);
    }
  } else if (run.flavor == Flavor::kZero1) {
    Zero1 zero(comm, *model, factory(s), options);
    for (int step = 0; step < kSteps; ++step) {
      zero.zero_grad();
      for (int i = 0; i < s.micro; ++i) micro_loss(step, i).backward();  // no traffic until step()
      if (s.max_norm > 0) result.norms.push_back(zero.clip_grad_norm(s.max_norm));
      zero.step();
    }
  } else if (run.flavor == Flavor::kZero2 || run.flavor == Flavor::kZero2EachMicro) {
    Zero2 zero(comm, *model, factory(s), options);
    for (int step = 0; step < kSteps; ++step) {
      zero.zero_grad();
      for (int i = 0; i < s.micro; ++i) {
        if (run.flavor == Flavor::kZero2 && i < s.micro - 1) {
          auto guard = zero.no_sync();
          micro_loss(step, i).backward();
        } else {
          micro_loss(step, i).backward();
        }
      }
      if (s.max_norm > 0) result.norms.push_back(zero.clip_grad_norm(s.max_norm));
      zero.step();
    }
  } else if (run.flavor == Flavor::kNaive3) {
    NaiveZero3 zero(comm, *model, factory(s), run.algorithm);
    for (int step = 0; step < kSteps; ++step) {
      zero.zero_grad();
      zero.gather();
      for (int i = 0; i < s.micro; ++i) micro_loss(step, i).backward();
      zero.step(s.max_norm);
    }
    zero.gather();
  } else {
    Zero3Options options3;
    options3.algorithm = run.algorithm;
    options3.prefetch = run.flavor != Flavor::kZero3NoPrefetch;
    Zero3 zero(comm, model, factory(s), options3);
    auto sharded_loss = [&](int step, int i) {
      const int64_t first = ((step * s.micro + i) * comm.size() + comm.rank()) * kRowsPerRank;
      return torch::nn::functional::mse_loss(zero.forward(data.x.narrow(0, first, kRowsPerRank)),
                                             data.y.narrow(0, first, kRowsPerRank)) /
             s.micro;
    };
    for (int step = 0; step < kSteps; ++step) {
      zero.zero_grad();
      for (int i = 0; i < s.micro; ++i) {
        if (run.flavor != Flavor::kZero3EachMicro && i < s.micro - 1) {
          auto guard = zero.no_sync();
          sharded_loss(step, i).backward();
        } else {
          sharded_loss(step, i).backward();
        }
      }
      if (s.max_norm > 0) result.norms.push_back(zero.clip_grad_norm(s.max_norm));
      zero.step();
    }
    std::vector<at::Tensor> pieces;
    for (const at::Tensor& p : zero.full_parameters()) pieces.push_back(p.reshape({-1}));
    result.params = at::cat(pieces);
    return result;
  }
  result.params = flat(*model);
  return result;
}

using test_support::largest_difference;

void compare(comm::Communicator& comm, const Setting& s, const std::vector<Run>& runs, Report& report) {
  const std::string where = describe(s, comm.size()) + ", rank " + std::to_string(comm.rank()) + ": ";
  const Data data = make_data(s.shape, kSteps * s.micro * comm.size() * kRowsPerRank, 42);
  const Result single = train_single(s, data, comm.size());
  if (!test_support::exceeds(largest_difference(single.params, flat(*make_model(s.shape, 7))), 1e-3))
    report.failures.push_back(where + "one process barely moved: the comparison would prove nothing");
  if (s.max_norm > 0 && single.norms.front() <= s.max_norm)
    report.failures.push_back(where + "clipping never engaged (norm " + std::to_string(single.norms.front()) + ")");
  const Result ddp = train(comm, s, {Flavor::kDdp, Algorithm::kNative, 0}, data);
  for (const Run& run : runs) {
    const Result r = train(comm, s, run, data);
    const double vs_single = largest_difference(r.params, single.params);
    const double vs_ddp = largest_difference(r.params, ddp.params);
    ++report.runs;
    report.worst_vs_single = test_support::worst_of({report.worst_vs_single, vs_single});
    report.worst_vs_ddp = test_support::worst_of({report.worst_vs_ddp, vs_ddp});
    if (!(vs_single <= kTolerance) || !(vs_ddp <= kTolerance))
      report.failures.push_back(where + describe(run) + ": max difference " + std::to_string(vs_single) +
                                " from one process, " + std::to_string(vs_ddp) + " from DDP");
    // The all-gather copies every element from its owner: bit for bit equal.
    at::Tensor rank0 = r.params.clone();
    comm.native_broadcast(rank0, 0);
    if (!at::equal(rank0, r.params)) report.failures.push_back(where + describe(run) + ": differs from rank 0's");
    for (size_t k = 0; k < r.norms.size(); ++k)
      if (!(std::abs(r.norms[k] - single.norms[k]) <= 1e-5 * single.norms[k]))
        report.failures.push_back(where + describe(run) + ": gradient norm " + std::to_string(r.norms[k]) +
                                  " at step " + std::to_string(k) + ", one process " +
                                  std::to_string(single.norms[k]));
  }
}

}  // namespace

Report check_against_references(comm::Communicator& comm, Coverage coverage) {
  Report report;
  if (coverage == Coverage::kSpotChecks) {
    const std::vector<Run> runs = {{Flavor::kNaive, Algorithm::kRing, 0},
                                   {Flavor::kZero1, Algorithm::kRing, 512},
                                   {Flavor::kZero2, Algorithm::kRing, 0},
                                   {Flavor::kZero2EachMicro, Algorithm::kNative, 512},
                                   {Flavor::kNaive3, Algorithm::kRing, 0},
                                   {Flavor::kZero3, Algorithm::kRing, 0},
                                   {Flavor::kZero3EachMicro, Algorithm::kNative, 0}};
    compare(comm, {kWide, true, 0.05, 1}, runs, report);
    compare(comm, {kOdd, false, 0.0, 3}, runs, report);
    return report;
  }
  // Several buckets, one bucket, one per parameter (chunks of the 1-element
  // bias are empty on all ranks but one), each through the ring and native.
  const std::vector<Run> every = {
      {Flavor::kNaive, Algorithm::kNative, 0},   {Flavor::kNaive, Algorithm::kRing, 0},
      {Flavor::kZero1, Algorithm::kRing, 512},   {Flavor::kZero1, Algorithm::kNative, int64_t{1} << 30},
      {Flavor::kZero1, Algorithm::kRing, 0},     {Flavor::kZero2, Algorithm::kRing, 512},
      {Flavor::kZero2, Algorithm::kNative, 0},   {Flavor::kZero2, Algorithm::kRing, 0},
      {Flavor::kNaive3, Algorithm::kNative, 0},  {Flavor::kZero3, Algorithm::kRing, 0},
      {Flavor::kZero3, Algorithm::kNative, 0},   {Flavor::kZero3NoPrefetch, Algorithm::kRing, 0},
  };
  for (const Shape& shape : {kWide, kOdd})
    for (bool adam : {false, true})
      for (double max_norm : {0.0, 0.05}) compare(comm, {shape, adam, max_norm, 1}, every, report);
  // Accumulation over 3 micro-steps: one process on the 3-fold batch.
  const std::vector<Run> accumulating = {
      {Flavor::kNaive, Algorithm::kNative, 0},
      {Flavor::kZero1, Algorithm::kRing, 512},
      {Flavor::kZero2, Algorithm::kRing, 512},
      {Flavor::kZero2EachMicro, Algorithm::kRing, 512},
      {Flavor::kZero2EachMicro, Algorithm::kNative, 0},
      {Flavor::kNaive3, Algorithm::kRing, 0},
      {Flavor::kZero3, Algorithm::kRing, 0},
      {Flavor::kZero3EachMicro, Algorithm::kRing, 0},
  };
  compare(comm, {kWide, true, 0.05, 3}, accumulating, report);
  compare(comm, {kOdd, false, 0.0, 3}, accumulating, report);
  return report;
}

}  // namespace distlab::zero::testing
