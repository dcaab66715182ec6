// "Parameter i's gradient is final": the event DDP's reducer and ZeRO-2/3
// build on. A post hook on each parameter's gradient accumulator (the
// autograd node that adds a new gradient into .grad) fires after the add,
// so the value in .grad is final for this backward, sums of earlier no_sync
// backwards included; a tensor hook (register_hook) would fire before it.
//
// The accumulators are held here: a parameter holds its own only weakly, so
// without this the node, and the hook on it, could be dropped between
// steps. The hooks are removed when this is destroyed. on_ready must not
// keep alive what holds this object (capture a weak_ptr).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/function.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace distlab::ddp {

class GradReadyHooks {
 public:
  GradReadyHooks(const std::vector<at::Tensor>& params, std::function<void(size_t index)> on_ready);
  ~GradReadyHooks();
  GradReadyHooks(const GradReadyHooks&) = delete;
  GradReadyHooks& operator=(const GradReadyHooks&) = delete;

 private:
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> keys_;
};

}  // namespace distlab::ddp
