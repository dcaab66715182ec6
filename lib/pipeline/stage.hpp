// One pipeline stage as the executor sees it: a forward function and the
// parameters whose gradients it leaves in .grad. Any torch::nn::Module (or
// a piece of one, or a plain function) fits:
//
//   pipeline::StageModule stage = pipeline::stage_of(my_module);  // calls my_module->forward(x)
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace distlab::pipeline {

struct StageModule {
  // input: the microbatch (first stage) or the previous stage's output;
  // returns this stage's output (the model's output on the last stage).
  std::function<at::Tensor(const at::Tensor&)> forward;
  // Every parameter that requires a gradient (W passes of split backwards
  // differentiate with respect to exactly these).
  std::vector<at::Tensor> parameters;
  // False when the stage's graph computes its parameters' gradients inside
  // its input's (a recomputed region holding parameters runs a backward of
  // its own, memory::recomputes_parameters): then B runs the whole
  // backward and W has nothing left to do.
  bool splits_backward = true;
};

// A module holder (Linear, Sequential, models::Gpt, ...) as a stage.
template <typename ModuleHolder>
StageModule stage_of(ModuleHolder module) {
  StageModule stage;
  for (const auto& p : module->parameters())
    if (p.requires_grad()) stage.parameters.push_back(p);
  stage.forward = [module](const at::Tensor& x) mutable { return module->forward(x); };
  return stage;
}

}  // namespace distlab::pipeline
