// The experts of a mixture-of-experts layer: E small MLPs of the same shape,
//
//   expert_e(x) = relu(x W1_e + b1_e) W2_e + b2_e      (d -> h -> d)
//
// held as stacked tensors, (n, d, h), (n, h), (n, h, d), (n, d), for the n
// experts [first, first + n) of the E. A rank of an expert group holds a
// slice of them: slice() copies experts [first, first + n) of a whole set,
// so the slices of E experts built once (the same seed) are the whole set's.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>

namespace distlab::experts {

class ExpertMlpsImpl : public torch::nn::Module {
 public:
  // `count` experts numbered from `first`, from the default generator.
  ExpertMlpsImpl(int64_t count, int64_t model_dim, int64_t hidden, int64_t first = 0);
  // From the stacked tensors (copied): w1 (n, d, h), b1 (n, h), w2 (n, h, d), b2 (n, d).
  ExpertMlpsImpl(const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2, const at::Tensor& b2,
                 int64_t first = 0);

  // Expert `local` (0 .. count-1, the global expert first + local) on rows x (n, d).
  at::Tensor forward(int64_t local, const at::Tensor& x);

  // Copies of experts [first, first + count) of this set (numbered as here).
  std::shared_ptr<ExpertMlpsImpl> slice(int64_t first, int64_t count) const;

  int64_t count() const { return w1.size(0); }
  int64_t first() const { return first_; }

  at::Tensor w1, b1, w2, b2;

 private:
  int64_t first_ = 0;
};
TORCH_MODULE(ExpertMlps);

}  // namespace distlab::experts
