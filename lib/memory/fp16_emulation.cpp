// float16 products emulated on the CPU (memory/fp16_emulation.hpp).
#include "memory/fp16_emulation.hpp"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "compat/torch.hpp"

#include <memory>
#include <mutex>
#include <string>

namespace distlab::memory {

namespace {

// An autocast key LibTorch leaves without kernels (compat/torch.hpp says
// which, per version).
constexpr c10::DispatchKey kKey = compat::kUnusedAutocastKey;

// float32 to float16 and back, recorded by autograd: the backward rounds
// the gradient the same way.
at::Tensor rounded(const at::Tensor& t) { return t.to(at::kHalf).to(t.scalar_type()); }

bool emulated(const at::Tensor& t) { return t.defined() && t.device().is_cpu() && t.scalar_type() == at::kFloat; }

// A product of two operands (mm, bmm) in float16's values.
template <at::Tensor (*Product)(const at::Tensor&, const at::Tensor&)>
at::Tensor product16(const at::Tensor& a, const at::Tensor& b) {
  c10::impl::ExcludeDispatchKeyGuard off(kKey);
  if (!emulated(a) || !emulated(b)) return Product(a, b);
  return rounded(Product(rounded(a), rounded(b)));
}

// The same with a tensor added (addmm, baddbmm: beta self + alpha a b).
template <at::Tensor (*Product)(const at::Tensor&, const at::Tensor&, const at::Tensor&, const c10::Scalar&,
                                const c10::Scalar&)>
at::Tensor added_product16(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const c10::Scalar& beta,
                           const c10::Scalar& alpha) {
  c10::impl::ExcludeDispatchKeyGuard off(kKey);
  if (!emulated(self) || !emulated(a) || !emulated(b)) return Product(self, a, b, beta, alpha);
  return rounded(Product(rounded(self), rounded(a), rounded(b), beta, alpha));
}

// linear whole, as autocast takes it: for 3-D inputs LibTorch's linear is
// a matmul and then a bias added in place, which would add in float32.
at::Tensor linear16(const at::Tensor& x, const at::Tensor& w, const compat::optional<at::Tensor>& b) {
  c10::impl::ExcludeDispatchKeyGuard off(kKey);
  const bool bias = b.has_value() && b->defined();
  if (!emulated(x) || !emulated(w) || (bias && !emulated(*b))) return at::linear(x, w, b);
  return rounded(at::linear(rounded(x), rounded(w), bias ? compat::optional<at::Tensor>(rounded(*b)) : b));
}

bool key_is_free() {
  for (const char* name : {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::linear"}) {
    const auto op = c10::Dispatcher::singleton().findSchema({name, ""});
    if (!op || op->hasKernelForDispatchKey(kKey)) return false;
  }
  return true;
}

bool register_once() {
  static std::unique_ptr<torch::Library> kernels, others;
  if (!key_is_free()) return false;
  try {
    others = std::make_unique<torch::Library>(torch::Library::IMPL, "_", kKey, __FILE__, __LINE__);
    others->fallback(torch::CppFunction::makeFallthrough());
  } catch (const c10::Error&) {
    return false;  // another fallback holds the key
  }
  kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  kernels->impl("mm", TORCH_FN(product16<at::mm>));
  kernels->impl("bmm", TORCH_FN(product16<at::bmm>));
  kernels->impl("addmm", TORCH_FN(added_product16<at::addmm>));
  kernels->impl("baddbmm", TORCH_FN(added_product16<at::baddbmm>));
  kernels->impl("linear", TORCH_FN(linear16));
  return true;
}

}  // namespace

bool fp16_emulation_available() {
  static std::once_flag once;
  static bool available = false;
  std::call_once(once, [] { available = register_once(); });
  return available;
}

// Autocast's keys start in every thread's excluded set; turning one on
// takes it out (as autocast's own switches do) and, since no tensor
// carries this one, puts it in the included set too.
bool fp16_emulated() {
  return c10::impl::tls_is_dispatch_key_included(kKey) && !c10::impl::tls_is_dispatch_key_excluded(kKey);
}

void set_fp16_emulated(bool on) {
  if (on && !fp16_emulation_available())
    throw std::invalid_argument(std::string("precision fp16 on the CPU: this LibTorch has kernels of its own on the "
                                            "key the emulation uses (") +
                                c10::toString(kKey) + "); use bf16 on the CPU, fp16 on CUDA");
  c10::impl::tls_set_dispatch_key_included(kKey, on);
  c10::impl::tls_set_dispatch_key_excluded(kKey, !on);
}

}  // namespace distlab::memory
