// Giving a pipeline stage the weights of the whole model (or of a checkpoint
// of it): parameters and buffers are matched by name, which is why the
// models keep the whole model's names on every stage.
#pragma once

namespace torch::nn {
class Module;
}

namespace distlab::models {

// Copies into every parameter and buffer of `to` the same-named tensor of
// `from` (values only; `to` keeps its own tensors, device and autograd
// state). `from` may hold more (the whole model for a stage). Throws naming
// the first tensor of `to` that `from` lacks or whose shape differs.
void copy_state_by_name(const torch::nn::Module& from, torch::nn::Module& to);

}  // namespace distlab::models
