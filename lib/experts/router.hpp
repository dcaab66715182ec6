// The router of a mixture-of-experts layer: which experts each token goes
// to, and with what weight.
//
//   logits = x W_g              (T, E): one linear map, no bias
//   probs  = softmax(logits)    in float32, whatever x's dtype
//   top-k  the k largest probabilities of each token, best first
//
// A token's output is the weighted sum of its k experts' outputs; the
// weights are the chosen probabilities (Switch, k = 1), or those divided by
// their sum (`normalize`, Mixtral's top-2).
//
// Two auxiliary losses keep the router healthy:
//
//   balancing (Switch, GShard)   E * sum_e f_e * P_e
//        f_e  the fraction of the T k assignments that went to expert e
//        P_e  the mean probability the router gave expert e
//     smallest (1) when tokens and probabilities spread evenly; f_e is
//     counted, not differentiated: the gradient reaches the router through P_e
//   z-loss (ST-MoE)              mean over tokens of logsumexp(logits)^2
//     keeps the logits small, so that float32's softmax stays exact
//
// Each enters the training loss times its coefficient.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

namespace distlab::experts {

struct Routing {
  at::Tensor logits;   // (T, E) float32
  at::Tensor probs;    // (T, E) float32
  at::Tensor experts;  // (T, k) int64, best first
  at::Tensor weights;  // (T, k) float32
};

// Throws std::invalid_argument naming k and E when k is not in [1, E].
Routing route(const at::Tensor& logits, int64_t top_k, bool normalize = false);

at::Tensor balancing_loss(const Routing& routing);  // a scalar, float32
at::Tensor z_loss(const at::Tensor& logits);         // a scalar, float32

// Assignments per expert (E,) int64: how many of the T k choices went to each.
at::Tensor assignments_per_expert(const Routing& routing);

class RouterImpl : public torch::nn::Module {
 public:
  // W_g ~ N(0, 1/d), from `generator` (default: the default generator).
  RouterImpl(int64_t model_dim, int64_t experts, int64_t top_k, bool normalize = false, at::Generator generator = {});
  // x (T, d) -> the routing of its T tokens.
  Routing forward(const at::Tensor& x);

  int64_t experts() const { return experts_; }
  int64_t top_k() const { return top_k_; }

  at::Tensor weight;  // (E, d)

 private:
  int64_t experts_, top_k_;
  bool normalize_;
};
TORCH_MODULE(Router);

}  // namespace distlab::experts
