#include "models/copy_state.hpp"

#include <torch/nn/module.h>
#include <torch/types.h>

#include <stdexcept>
#include <string>

namespace distlab::models {

namespace {

void copy_matching(const torch::OrderedDict<std::string, at::Tensor>& from,
                   torch::OrderedDict<std::string, at::Tensor> to, const char* kind) {
  for (auto& item : to) {
    const at::Tensor* source = from.find(item.key());
    if (source == nullptr)
      throw std::invalid_argument(std::string("copy_state_by_name: ") + kind + " '" + item.key() +
                                  "' is not in the source (hint: build the stage from the same options as the model)");
    if (source->sizes() != item.value().sizes())
      throw std::invalid_argument(std::string("copy_state_by_name: ") + kind + " '" + item.key() + "' has shape " +
                                  c10::str(item.value().sizes()) + " here but " + c10::str(source->sizes()) +
                                  " in the source (hint: the options differ)");
    item.value().copy_(*source);
  }
}

}  // namespace

void copy_state_by_name(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;  // parameters are leaves that require grad
  copy_matching(from.named_parameters(), to.named_parameters(), "parameter");
  copy_matching(from.named_buffers(), to.named_buffers(), "buffer");
}

}  // namespace distlab::models
