#include "ddp/grad_ready_hooks.hpp"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <utility>

namespace distlab::ddp {
namespace {

class GradReadyHook : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(std::shared_ptr<std::function<void(size_t)>> on_ready, size_t index)
      : on_ready_(std::move(on_ready)), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    (*on_ready_)(index_);
    return outputs;
  }

 private:
  std::shared_ptr<std::function<void(size_t)>> on_ready_;
  size_t index_;
};

}  // namespace

GradReadyHooks::GradReadyHooks(const std::vector<at::Tensor>& params, std::function<void(size_t index)> on_ready) {
  auto shared = std::make_shared<std::function<void(size_t)>>(std::move(on_ready));
  for (size_t i = 0; i < params.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params[i]);
    keys_.push_back(accumulator->add_post_hook(std::make_unique<GradReadyHook>(shared, i)));
    accumulators_.push_back(std::move(accumulator));
  }
}

GradReadyHooks::~GradReadyHooks() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(keys_[i]);
}

}  // namespace distlab::ddp
