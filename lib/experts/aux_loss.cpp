#include "experts/aux_loss.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace distlab::experts {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

struct AttachAuxLoss : public torch::autograd::Function<AttachAuxLoss> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& out, const at::Tensor& aux, double scale) {
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["aux_like"] = at::empty({}, aux.options());  // the gradient's dtype and device
    return out.clone();
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::Tensor like = ctx->saved_data["aux_like"].toTensor();
    return {grads[0], at::full({}, scale, like.options()), at::Tensor()};
  }
};

}  // namespace

at::Tensor attach_aux_loss(const at::Tensor& out, const at::Tensor& aux, double scale) {
  if (!at::GradMode::is_enabled() || !aux.requires_grad()) return out;
  return AttachAuxLoss::apply(out, aux, scale);
}

}  // namespace distlab::experts
