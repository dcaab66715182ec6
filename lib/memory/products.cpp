// Products kept for the recomputation (memory/products.hpp).
#include "memory/products.hpp"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/functional/linear.h>

#include "compat/torch.hpp"

#include <memory>
#include <stdexcept>
#include <string>

namespace distlab::memory {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A tensor handed to a node's forward without being one of its inputs.
using Held = std::shared_ptr<at::Tensor>;

// y = x w^T + b, already computed: returns it, and differentiates as
// autograd differentiates LibTorch's C++ linear (torch::nn::functional::
// linear: addmm for a 2-D x, else x folded to rows times w^T, then += b):
// dx = g w, dw = g^T x (w^T is column-major: autograd computes it so), db =
// g summed to b's shape.
struct ReusedLinear : torch::autograd::Function<ReusedLinear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                            Held y) {
    ctx->save_for_backward({x, w, b});
    return *y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &b = saved[2], &g = grads[0];
    const at::Tensor x2 = x.reshape({-1, x.size(-1)});
    const at::Tensor g2 = g.reshape({x2.size(0), w.size(0)});
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) dx = g2.mm(w).view(x.sizes());
    if (ctx->needs_input_grad(1)) dw = g2.t().mm(x2);
    if (ctx->needs_input_grad(2) && b.defined()) db = at::sum_to(g, b.sizes());
    return {dx, dw, db, at::Tensor()};
  }
};

// a.bmm(b), already computed; the backward of bmm.
struct ReusedBmm : torch::autograd::Function<ReusedBmm> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b, Held y) {
    ctx->save_for_backward({a, b});
    return *y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1], &g = grads[0];
    at::Tensor da, db;
    if (ctx->needs_input_grad(0)) da = g.bmm(b.transpose(1, 2));
    if (ctx->needs_input_grad(1)) db = a.transpose(1, 2).bmm(g);
    return {da, db, at::Tensor()};
  }
};

// What autocast (memory/precision.hpp) does to a product's inputs on their
// device: each floating tensor but a double cast to the compute type (a
// step of the graph like any other); nothing when it is off. The kept path
// casts them itself, so that its products see what autocast's would.
at::Tensor as_autocast_would(const at::Tensor& t) {
  if (!t.defined() || !t.is_floating_point() || t.scalar_type() == at::kDouble) return t;
  const c10::DeviceType device = t.device().type();
  if ((t.is_cuda() || t.is_cpu()) && compat::autocast_enabled(device)) return t.to(compat::autocast_dtype(device));
  return t;
}

}  // namespace

at::Tensor Products::linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return torch::nn::functional::linear(x, w, b);
}
at::Tensor Products::bmm(const at::Tensor& a, const at::Tensor& b) { return at::bmm(a, b); }

Products& plain_products() {
  static Products plain;
  return plain;
}

at::Tensor KeptProducts::take(const char* what) {
  if (next_ >= kept_.size())
    throw std::logic_error(std::string("KeptProducts: the recomputation asks for a ") + what +
                           " the first run did not compute (the region must run the same products each time)");
  at::Tensor y = std::move(kept_[next_]);
  kept_[next_++] = at::Tensor();
  return y;
}

at::Tensor KeptProducts::linear(const at::Tensor& x_in, const at::Tensor& w_in, const at::Tensor& b_in) {
  if (x_in.dim() != 2 && x_in.dim() != 3) return Products::linear(x_in, w_in, b_in);
  // Autocast casts what its product reads: x and w, and b only where the
  // product takes it (addmm, a 2-D x); a 3-D x's b is added after, as is.
  const at::Tensor x = as_autocast_would(x_in), w = as_autocast_would(w_in);
  const at::Tensor b = x_in.dim() == 2 ? as_autocast_would(b_in) : b_in;
  if (!c10::GradMode::is_enabled()) {
    kept_.push_back(Products::linear(x, w, b));
    return kept_.back();
  }
  return ReusedLinear::apply(x, w, b, std::make_shared<at::Tensor>(take("linear")));
}

at::Tensor KeptProducts::bmm(const at::Tensor& a_in, const at::Tensor& b_in) {
  const at::Tensor a = as_autocast_would(a_in), b = as_autocast_would(b_in);
  if (!c10::GradMode::is_enabled()) {
    kept_.push_back(Products::bmm(a, b));
    return kept_.back();
  }
  return ReusedBmm::apply(a, b, std::make_shared<at::Tensor>(take("bmm")));
}

void KeptProducts::clear() {
  kept_.clear();
  next_ = 0;
}

}  // namespace distlab::memory
