// Both models against PyTorch in Python: the same weights (a state dict
// written with torch::pickle_save, loaded there with strict=True, so every
// name and shape must match) and the same tokens give the same logits, the
// same cross-entropy and the same gradient for every parameter, in eval mode. The reference is tests/models/reference_models.py: the pipelining tutorial's
// Transformer verbatim, and the DDP + Pipe tutorial's PositionalEncoding, Encoder,
// TransformerEncoderLayers and Decoder with flat names.
#include <gtest/gtest.h>
#include <ATen/ATen.h>
#include <torch/serialize.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>

#include <unistd.h>

#include "model_test_util.hpp"
#include "compat/torch.hpp"
#include "support/python_torch.hpp"
#include "support/required_tool.hpp"
#include "models/gpt.hpp"
#include "models/transformer_lm.hpp"

namespace distlab::models {
namespace {

namespace fs = std::filesystem;
using testing::max_abs_diff;

using test_support::have_python_torch;

struct Reference {
  at::Tensor output;
  at::Tensor loss;
  std::map<std::string, at::Tensor> grads;
  int64_t trainable = 0;
  double pe_max_diff = -1;  // lm only
};

// Saves the model's parameters and buffers by name, the tokens and the
// targets; runs the Python reference on them; returns what it computed.
Reference run_reference(const torch::nn::Module& model, const at::Tensor& tokens, const at::Tensor& targets,
                        const std::string& args, const std::string& case_name) {
  const fs::path dir = fs::temp_directory_path() / ("distlab_models_" + case_name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  c10::Dict<std::string, at::Tensor> state;
  for (const auto& item : model.named_parameters()) state.insert(item.key(), item.value().detach());
  for (const auto& item : model.named_buffers()) state.insert(item.key(), item.value());
  test_support::save_pickle(dir / "state.pt", state);
  test_support::save_pickle(dir / "input.pt", tokens);
  test_support::save_pickle(dir / "targets.pt", targets);

  const fs::path script = fs::path(DISTLAB_SOURCE_DIR) / "tests" / "models" / "reference_models.py";
  const std::string command = script.string() + " " + args + " " + dir.string();
  const test_support::PythonRun run = test_support::run_python(command, dir / "log");
  const int status = run.status;
  std::stringstream log;
  log << run.log;
  Reference reference;
  EXPECT_EQ(status, 0) << "the PyTorch reference failed: " << command << "\n" << log.str();
  if (status != 0) return reference;
  const c10::Dict<c10::IValue, c10::IValue> result = test_support::load_pickle(dir / "reference.pt").toGenericDict();
  reference.output = result.at("output").toTensor();
  reference.loss = result.at("loss").toTensor();
  for (const auto& item : result.at("grads").toGenericDict())
    reference.grads[item.key().toStringRef()] = item.value().toTensor();
  reference.trainable = result.at("trainable").toTensor().item<int64_t>();
  if (result.contains("pe_max_diff")) reference.pe_max_diff = result.at("pe_max_diff").toTensor().item<double>();
  std::cout << case_name << ": " << log.str();
  fs::remove_all(dir);
  return reference;
}

// Forward, cross-entropy and backward in eval mode (dropout off), compared
// with the reference: logits, loss and each parameter's gradient by name.
void expect_matches_reference(torch::nn::Module& model, const std::function<at::Tensor(const at::Tensor&)>& forward,
                              const at::Tensor& tokens, int64_t vocab, const std::string& args,
                              const std::string& case_name, bool has_positional_table) {
  model.eval();
  compat::zero_grad(model);
  const at::Tensor targets = torch::randint(vocab, tokens.sizes(), torch::kLong);
  const at::Tensor logits = forward(tokens);
  const at::Tensor loss = at::cross_entropy_loss(logits.reshape({-1, vocab}), targets.reshape(-1));
  loss.backward();
  const Reference reference = run_reference(model, tokens, targets, args, case_name);
  ASSERT_TRUE(reference.output.defined()) << case_name;
  ASSERT_EQ(reference.output.sizes(), logits.sizes()) << case_name;
  const double diff = max_abs_diff(logits.detach(), reference.output);
  std::cout << case_name << ": max |logits - pytorch| = " << diff
            << " (max |logits| = " << logits.abs().max().item<double>() << ")"
            << ", |loss - pytorch| = " << max_abs_diff(loss.detach(), reference.loss);
  EXPECT_LE(diff, 1e-5) << case_name;
  EXPECT_NEAR(loss.item<double>(), reference.loss.item<double>(), 1e-5) << case_name;

  test_support::Worst worst_grad;
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters()) {
    names.push_back(item.key());
    const auto found = reference.grads.find(item.key());
    ASSERT_NE(found, reference.grads.end()) << case_name << ": PyTorch has no gradient for " << item.key();
    ASSERT_TRUE(item.value().grad().defined()) << case_name << ": no gradient for " << item.key();
    const double scale = 1.0 + found->second.abs().max().item<double>();
    const double grad_diff = max_abs_diff(item.value().grad(), found->second) / scale;
    worst_grad.add(grad_diff);
    EXPECT_LE(grad_diff, 1e-5) << case_name << ": gradient of " << item.key();
  }
  EXPECT_EQ(names.size(), reference.grads.size()) << case_name << ": PyTorch trains other parameters";
  std::cout << ", max relative |grad - pytorch| over " << names.size() << " parameters = " << worst_grad.value << "\n";
  EXPECT_EQ(reference.trainable, count_parameters(model)) << case_name;
  if (has_positional_table) {
    // Built as the seed builds it, not only loaded: the reference compares
    // its own table with DistLab's before loading.
    std::cout << case_name << ": max |pe - pytorch's pe| = " << reference.pe_max_diff << "\n";
    EXPECT_GE(reference.pe_max_diff, 0.0) << case_name << ": the reference did not report its table";
    EXPECT_LE(reference.pe_max_diff, 1e-6) << case_name;
  }
}

TEST(PyTorchReference, GptEqualsSeed002Model) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(have_python_torch(), test_support::no_python_torch());
  // The tutorial's model leaves dim_feedforward at PyTorch's 2048.
  const GptOptions options{/*dim=*/32, /*n_layers=*/2, /*n_heads=*/4, /*vocab_size=*/50};
  torch::manual_seed(6);
  Gpt model(options);
  EXPECT_EQ(count_parameters(options), count_parameters(*model));
  const at::Tensor tokens = torch::randint(options.vocab_size, {7, 3}, torch::kLong);  // (A, B)
  expect_matches_reference(
      *model, [&](const at::Tensor& x) { return model(x); }, tokens, options.vocab_size,
      "gpt --dim 32 --n-layers 2 --n-heads 4 --vocab-size 50", "gpt", /*has_positional_table=*/false);
}

TEST(PyTorchReference, TransformerLmEqualsSeed001Model) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(have_python_torch(), test_support::no_python_torch());
  for (bool causal : {false, true}) {
    TransformerLmOptions options = transformer_lm_preset("tiny", /*ntokens=*/60);
    options.nlayers = 3;
    options.causal = causal;
    torch::manual_seed(7);
    TransformerLm model(options);
    const at::Tensor src = torch::randint(options.ntokens, {9, 4}, torch::kLong);  // (S, N)
    const std::string args = "lm --ntokens 60 --emsize 32 --nhid 64 --nlayers 3 --nhead 2" +
                             std::string(causal ? " --causal" : "");
    expect_matches_reference(
        *model, [&](const at::Tensor& x) { return model(x); }, src, options.ntokens, args,
        causal ? "lm_causal" : "lm", /*has_positional_table=*/true);
  }
}

}  // namespace
}  // namespace distlab::models
