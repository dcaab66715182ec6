// The auxiliary losses of a layer deep inside a model (a pipeline stage's
// middle, far from the loss the trainer calls backward on) reach the
// router anyway: attach_aux_loss() returns the layer's output unchanged,
// and in the backward passes the output's gradient through and gives the
// auxiliary loss the gradient `scale` (Megatron-LM's MoEAuxLossAutoScaler
// does the same). So a model with experts trains as a dense one does: no
// loss to collect from the layers, whatever the stage, the schedule or the
// recomputation.
//
// `scale` is d(training loss)/d(aux): 1 for one batch; 1/M when the step's
// loss is the mean over M microbatches, each with its own auxiliary loss.
#pragma once

#include <ATen/core/Tensor.h>

namespace distlab::experts {

// `out`'s values (a copy), with `aux` (a scalar) joined to its backward.
// Without grad mode, or when `aux` needs no gradient, `out` itself.
at::Tensor attach_aux_loss(const at::Tensor& out, const at::Tensor& aux, double scale);

}  // namespace distlab::experts
