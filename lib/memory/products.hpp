// The matrix products of a region, for the keep-the-matmuls recomputation
// policy (torchtitan's op-level selective checkpointing: save what the
// matmuls produced, recompute everything else).
//
// A region written with Products runs its linear layers and batched
// products through it. plain_products() multiplies. A KeptProducts, used
// inside memory::checkpoint(), multiplies in the region's first run
// (gradients off) and keeps each product's output; when the backward runs
// the region again (gradients on), each product takes its kept output back
// instead of multiplying again, through a node whose backward is the
// product's own (the formulas LibTorch's autograd uses for addmm and bmm,
// so the gradients are the plain run's bit for bit). What the region then
// keeps between its forward and its backward is its input and its
// products' outputs; the softmax, the dropout masks, the norms and the
// activations in between are computed again, which costs little time.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <vector>

namespace distlab::memory {

class Products {
 public:
  virtual ~Products() = default;
  // x w^T + b as LibTorch's modules compute it (torch::nn::functional::
  // linear: addmm for a 2-D x, else a matmul and += b): x (..., in), w (out,
  // in), b (out) or undefined.
  virtual at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);
  // at::bmm(a, b): (B, n, k) by (B, k, m).
  virtual at::Tensor bmm(const at::Tensor& a, const at::Tensor& b);
};

// Multiplies, every time.
Products& plain_products();

class KeptProducts : public Products {
 public:
  // Gradients off (the region's first run): multiplies and keeps the
  // output. Gradients on (its recomputation): the output kept in the same
  // place of the first run, with the product's backward. A linear of an x
  // with other than 2 or 3 dimensions runs plainly both times.
  at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) override;
  at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) override;

  size_t kept() const { return kept_.size() - next_; }  // outputs held, not yet taken back
  // Forgets what was kept (after a recomputation, or when none will come).
  void clear();

 private:
  at::Tensor take(const char* what);
  std::vector<at::Tensor> kept_;
  size_t next_ = 0;
};

}  // namespace distlab::memory
