// A piece of a model as a module of its own: the submodules it shares with
// the model (so their parameters are the model's very tensors) and the
// function that runs them. A torch::nn::Sequential of these is the model cut
// into one-tensor steps, as ZeRO-3 (lib/zero/zero3.hpp) gathers and frees
// parameters unit by unit; TransformerLm::units() builds one.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace distlab::models {

class ModelUnitImpl : public torch::nn::Module {
 public:
  using Parts = std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>;
  using Function = std::function<at::Tensor(const at::Tensor&)>;

  // `parts` are registered under their names ("decoder" -> "decoder.weight").
  ModelUnitImpl(const Parts& parts, Function run) : run_(std::move(run)) {
    for (const auto& [name, part] : parts) register_module(name, part);
  }

  at::Tensor forward(const at::Tensor& x) { return run_(x); }

 private:
  Function run_;
};
TORCH_MODULE(ModelUnit);

}  // namespace distlab::models
