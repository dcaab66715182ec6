// The independent reference for ZeRO-1: PyTorch's own
// ZeroRedundancyOptimizer (tests/zero/pytorch_zero_reference.py: python3-torch,
// 2 and 4 gloo processes, CPU) against DistLab's Zero1 on as many thread
// ranks, from the same initial weights on the same data, with SGD+momentum
// and with Adam.
//
// The two shard differently. ZeroRedundancyOptimizer gives each parameter
// whole to one rank, averages the gradients with an all-reduce (DDP's) and
// has each rank broadcast the parameters it stepped. Zero1 cuts buckets into
// element ranges, reduce-scatters the gradients and all-gathers the
// parameters. SGD and Adam update each element from its own gradient and
// state, so after the same steps the parameters must agree within the
// float32 rounding of the gradient sums (zero_checks.hpp's kTolerance).
// Skipped, with the reason, where /usr/bin/python3 or its torch is missing
// (failed under CI=true); a reference script that fails fails the test.
#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/serialize.h>
#include <torch/types.h>

#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "comm/threads_backend.hpp"
#include "lessons/run_program.hpp"
#include "support/differences.hpp"
#include "support/python_torch.hpp"
#include "support/required_tool.hpp"
#include "zero/zero1.hpp"
#include "zero_checks.hpp"

namespace distlab::zero {
namespace {

using lessons::testing::run;

const std::string kPython = "/usr/bin/python3";
const std::string kScript = std::string(DISTLAB_SOURCE_DIR) + "/tests/zero/pytorch_zero_reference.py";
constexpr int kSteps = 5;
constexpr int64_t kRowsPerRank = 4;

// pytorch_zero_reference.py's model: 8 -> 32 -> 32 -> 4, six parameters of
// 256, 32, 1024, 32, 128 and 4 elements; weights from a generator of its
// own (thread ranks build models at the same time).
torch::nn::Sequential make_model(uint64_t seed) {
  torch::nn::Sequential model(torch::nn::Linear(8, 32), torch::nn::Tanh(), torch::nn::Linear(32, 32),
                              torch::nn::Tanh(), torch::nn::Linear(32, 4));
  auto gen = at::detail::createCPUGenerator(seed);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.copy_((at::rand(p.sizes(), gen) * 2 - 1) * 0.4);
  return model;
}

std::string temp_path(const std::string& name, int ranks) {
  return ::testing::TempDir() + "/zero_ref_" + name + "." + std::to_string(getpid()) + "." + std::to_string(ranks) +
         ".pt";
}

void save(const c10::Dict<std::string, at::Tensor>& blob, const std::string& path) {
  const auto bytes = torch::pickle_save(blob);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

c10::impl::GenericDict load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) throw std::runtime_error("PyTorch wrote nothing to " + path);
  return torch::pickle_load(bytes).toGenericDict();
}

// Zero1 on `ranks` thread ranks, the script's steps and rows; every rank's
// parameters at the end, by name.
std::vector<std::map<std::string, at::Tensor>> train_zero1(int ranks, const torch::nn::Sequential& initial,
                                                           const at::Tensor& x, const at::Tensor& y,
                                                           const OptimizerFactory& optimizer, ZeroOptions options) {
  std::vector<std::map<std::string, at::Tensor>> params(static_cast<size_t>(ranks));
  comm::run_thread_ranks(ranks, [&](comm::Communicator& comm) {
    auto model = make_model(1000 + static_cast<uint64_t>(comm.rank()));
    if (comm.rank() == 0) {  // the others get rank 0's weights from Zero1's broadcast
      torch::NoGradGuard no_grad;
      auto from = initial->named_parameters();
      for (auto& item : model->named_parameters()) item.value().copy_(from[item.key()]);
    }
    Zero1 zero(comm, *model, optimizer, options);
    for (int s = 0; s < kSteps; ++s) {
      const int64_t first = (s * ranks + comm.rank()) * kRowsPerRank;
      zero.zero_grad();
      torch::nn::functional::mse_loss(model->forward(x.narrow(0, first, kRowsPerRank)),
                                      y.narrow(0, first, kRowsPerRank))
          .backward();
      zero.step();
    }
    for (const auto& item : model->named_parameters())
      params[static_cast<size_t>(comm.rank())][item.key()] = item.value().detach().clone();
  });
  return params;
}

class PyTorchZeroReference : public ::testing::TestWithParam<int> {};

TEST_P(PyTorchZeroReference, Zero1EndsWithZeroRedundancyOptimizersParameters) {
  const int ranks = GetParam();
  DISTLAB_SKIP_OR_FAIL_WITHOUT(test_support::have_python_torch(), test_support::no_python_torch());
  const auto found = run(kPython + " " + kScript + " check");
  ASSERT_EQ(found.status, 0) << "the PyTorch reference failed (" << kScript << " check):\n" << found.output;

  // What both sides start from: the weights and the data, (steps * ranks * rows, 8) and (..., 4).
  const auto initial = make_model(7);
  auto gen = at::detail::createCPUGenerator(99);
  const at::Tensor x = at::randn({kSteps * ranks * kRowsPerRank, 8}, gen, at::kFloat);
  const at::Tensor y = at::randn({kSteps * ranks * kRowsPerRank, 4}, gen, at::kFloat);
  c10::Dict<std::string, at::Tensor> blob;
  for (const auto& item : initial->named_parameters()) blob.insert(item.key(), item.value().detach().clone());
  blob.insert("x", x);
  blob.insert("y", y);
  const std::string in_path = temp_path("in", ranks), out_path = temp_path("out", ranks);
  save(blob, in_path);
  const auto trained = run("env OMP_NUM_THREADS=1 " + kPython + " " + kScript + " train " + in_path + " " + out_path +
                           " " + std::to_string(ranks) + " " + std::to_string(kSteps));
  ASSERT_EQ(trained.status, 0) << "the PyTorch reference failed:\n" << trained.output;
  const auto theirs = load(out_path);

  // PyTorch's partition is whole parameters, and every rank owns some: the
  // comparison crosses ranks' shards in both systems.
  std::set<int64_t> owners;
  for (const auto& item : initial->named_parameters())
    owners.insert(theirs.at("owner/" + item.key()).toTensor().item<int64_t>());
  EXPECT_EQ(owners.size(), static_cast<size_t>(ranks));

  struct Case {
    const char* name;  // the script's key
    OptimizerFactory optimizer;
  };
  const std::vector<Case> cases = {{"sgd", sgd(torch::optim::SGDOptions(0.1).momentum(0.9))},
                                   {"adam", adam(torch::optim::AdamOptions(0.01))}};
  ZeroOptions one_bucket, small_buckets;  // the default 25 MiB cap: one bucket; 1 KiB: buckets cut parameters
  small_buckets.bucket_cap_bytes = 1024;
  small_buckets.first_bucket_bytes = 512;
  for (const Case& c : cases)
    for (const ZeroOptions& options : {one_bucket, small_buckets}) {
      const auto ours = train_zero1(ranks, initial, x, y, c.optimizer, options);
      test_support::Worst worst, moved;
      for (int r = 0; r < ranks; ++r)
        for (const auto& [name, p] : ours[static_cast<size_t>(r)]) {
          const std::string key = std::string(c.name) + "/" + std::to_string(r) + "/" + name;
          ASSERT_TRUE(theirs.contains(key)) << key;
          worst.add(p, theirs.at(key).toTensor());
          moved.add(p, initial->named_parameters()[name]);
        }
      const std::string where = std::string(c.name) + ", bucket cap " + std::to_string(options.bucket_cap_bytes) +
                                ", " + std::to_string(ranks) + " ranks";
      EXPECT_TRUE(test_support::exceeds(moved.value, 1e-2))
          << where << ": training moved the weights by " << moved.value << "; the comparison would prove nothing";
      EXPECT_LT(worst.value, testing::kTolerance) << where << ": largest difference from ZeroRedundancyOptimizer";
      std::printf("%s: largest parameter difference from ZeroRedundancyOptimizer after %d steps: %.3g (moved %.3g)\n",
                  where.c_str(), kSteps, worst.value, moved.value);
    }
  std::remove(in_path.c_str());
  std::remove(out_path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Processes, PyTorchZeroReference, ::testing::Values(2, 4));

}  // namespace
}  // namespace distlab::zero
