// The tensor-parallel GPT layer against the pipelining tutorial's layer in PyTorch
// (Python): nn.TransformerDecoderLayer(32, 4) as the seed builds it (its
// default feed-forward of 2048), called as layer(h, h), eval mode. DistLab
// writes the unsplit weights, h and a probe; tests/models/reference_models.py
// (gpt_layer) loads them with strict=True and computes the output and every
// gradient of sum(layer(h, h) * probe); the layer cut over 2 and 4 thread
// ranks gives the same output, input gradient and (gathered) parameter
// gradients.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/transformerlayer.h>
#include <torch/utils.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "checks.hpp"
#include "comm/threads_backend.hpp"
#include "support/python_torch.hpp"
#include "support/required_tool.hpp"
#include "tensor_parallel/layer.hpp"

namespace distlab::tensor_parallel {
namespace {

namespace fs = std::filesystem;

TEST(PyTorchReference, TensorParallelGptLayerEqualsSeed002Layer) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(test_support::have_python_torch(), test_support::no_python_torch());
  torch::manual_seed(3);
  torch::nn::TransformerDecoderLayer full(torch::nn::TransformerDecoderLayerOptions(32, 4));
  full->eval();
  const at::Tensor h = at::randn({6, 3, 32}), probe = at::randn({6, 3, 32});

  const fs::path dir = fs::temp_directory_path() / ("distlab_tp_gpt_layer_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  c10::Dict<std::string, at::Tensor> state;
  for (const auto& item : full->named_parameters()) state.insert(item.key(), item.value().detach());
  test_support::save_pickle(dir / "state.pt", state);
  test_support::save_pickle(dir / "input.pt", h);
  test_support::save_pickle(dir / "targets.pt", probe);
  const fs::path script = fs::path(DISTLAB_SOURCE_DIR) / "tests" / "models" / "reference_models.py";
  const auto run = test_support::run_python(script.string() + " gpt_layer --dim 32 --n-heads 4 " + dir.string(),
                                            dir / "log");
  ASSERT_EQ(run.status, 0) << "the PyTorch reference failed:\n" << run.log;
  const auto result = test_support::load_pickle(dir / "reference.pt").toGenericDict();
  const at::Tensor output = result.at("output").toTensor();
  std::map<std::string, at::Tensor> grads;
  for (const auto& item : result.at("grads").toGenericDict()) grads[item.key().toStringRef()] = item.value().toTensor();
  fs::remove_all(dir);

  for (int t : {2, 4}) {
    std::mutex mutex;
    test_support::Worst worst_output, worst_grad;
    size_t compared = 0;
    comm::run_thread_ranks(t, [&](comm::Communicator& group) {
      ParallelDecoderLayer layer(group, full);
      layer->eval();
      at::Tensor x = h.clone().requires_grad_(true);
      const at::Tensor y = layer(x, x);
      (y * probe).sum().backward();
      std::map<std::string, at::Tensor> mine = layer->whole_state(/*gradients=*/true);
      mine["input"] = x.grad();
      test_support::Worst grad;
      for (const auto& [name, reference] : grads)  // relative to the gradient's size, as tests/models does
        grad.add(mine.count(name) ? testing::largest_difference(mine.at(name), reference) /
                                        (1.0 + reference.abs().max().item<double>())
                                  : test_support::kInfinite);
      std::lock_guard<std::mutex> lock(mutex);
      worst_output.add(y.detach(), output);
      worst_grad.add(grad.value);
      compared = mine.size();
    });
    EXPECT_LE(worst_output.value, 1e-5) << "t=" << t;
    EXPECT_LE(worst_grad.value, 1e-5) << "t=" << t;
    EXPECT_EQ(compared, grads.size()) << "t=" << t << ": the parameters differ from PyTorch's";
    std::printf("  t=%d: max |output - pytorch| %.3g, max relative |gradient - pytorch| %.3g over %zu tensors\n", t,
                worst_output.value, worst_grad.value, grads.size());
  }
}

}  // namespace
}  // namespace distlab::tensor_parallel
