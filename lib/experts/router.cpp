#include "experts/router.hpp"

#include <ATen/ATen.h>

#include "compat/torch.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace distlab::experts {

Routing route(const at::Tensor& logits, int64_t top_k, bool normalize) {
  const int64_t E = logits.size(-1);
  if (top_k < 1 || top_k > E)
    throw std::invalid_argument("router: top-k " + std::to_string(top_k) + " with " + std::to_string(E) +
                                " experts: a token goes to between 1 and " + std::to_string(E) +
                                " experts (lower --top-k or add --experts)");
  Routing r;
  r.logits = logits.to(at::kFloat);
  r.probs = at::softmax(r.logits, -1);
  auto [values, indices] = at::topk(r.probs, top_k, -1, /*largest=*/true, /*sorted=*/true);
  r.experts = indices;
  r.weights = normalize ? values / values.sum(-1, /*keepdim=*/true) : values;
  return r;
}

at::Tensor assignments_per_expert(const Routing& routing) {
  const int64_t E = routing.probs.size(-1);
  return at::bincount(routing.experts.reshape({-1}).cpu(), /*weights=*/{}, E).to(at::kLong);
}

at::Tensor balancing_loss(const Routing& routing) {
  const int64_t E = routing.probs.size(-1);
  const at::Tensor counts = assignments_per_expert(routing).to(routing.probs.device(), at::kFloat);
  const at::Tensor f = counts / static_cast<double>(routing.experts.numel());  // no gradient: counted
  const at::Tensor P = routing.probs.mean(0);
  return (f * P).sum() * static_cast<double>(E);
}

at::Tensor z_loss(const at::Tensor& logits) { return at::logsumexp(logits.to(at::kFloat), -1).pow(2).mean(); }

RouterImpl::RouterImpl(int64_t model_dim, int64_t experts, int64_t top_k, bool normalize, at::Generator generator)
    : experts_(experts), top_k_(top_k), normalize_(normalize) {
  if (experts < 1) throw std::invalid_argument("router: " + std::to_string(experts) + " experts: at least 1");
  (void)route(at::zeros({1, experts}), top_k);  // refuses k outside [1, E] now, not at the first forward
  const compat::optional<at::Generator> from =
      generator.defined() ? compat::optional<at::Generator>(generator) : compat::nullopt;
  weight = register_parameter("weight", at::randn({experts, model_dim}, from) / std::sqrt(double(model_dim)));
}

Routing RouterImpl::forward(const at::Tensor& x) { return route(at::linear(x, weight), top_k_, normalize_); }

}  // namespace distlab::experts
