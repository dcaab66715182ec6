#include "experts/expert_mlps.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace distlab::experts {

ExpertMlpsImpl::ExpertMlpsImpl(int64_t count, int64_t model_dim, int64_t hidden, int64_t first)
    : ExpertMlpsImpl(at::randn({count, model_dim, hidden}) / std::sqrt(double(model_dim)), at::zeros({count, hidden}),
                     at::randn({count, hidden, model_dim}) / std::sqrt(double(hidden)), at::zeros({count, model_dim}),
                     first) {}

ExpertMlpsImpl::ExpertMlpsImpl(const at::Tensor& w1_, const at::Tensor& b1_, const at::Tensor& w2_,
                               const at::Tensor& b2_, int64_t first)
    : first_(first) {
  w1 = register_parameter("w1", w1_.detach().clone());
  b1 = register_parameter("b1", b1_.detach().clone());
  w2 = register_parameter("w2", w2_.detach().clone());
  b2 = register_parameter("b2", b2_.detach().clone());
}

at::Tensor ExpertMlpsImpl::forward(int64_t local, const at::Tensor& x) {
  if (local < 0 || local >= count())
    throw std::invalid_argument("experts: local expert " + std::to_string(local) + " of " + std::to_string(count()));
  const at::Tensor h = at::relu(at::matmul(x, w1[local]) + b1[local]);
  return at::matmul(h, w2[local]) + b2[local];
}

std::shared_ptr<ExpertMlpsImpl> ExpertMlpsImpl::slice(int64_t first, int64_t count) const {
  if (first < first_ || count < 0 || first + count > first_ + this->count())
    throw std::invalid_argument("experts: no experts [" + std::to_string(first) + ", " + std::to_string(first + count) +
                                ") in a set of [" + std::to_string(first_) + ", " +
                                std::to_string(first_ + this->count()) + ")");
  const int64_t at = first - first_;
  auto part = [&](const at::Tensor& t) { return t.narrow(0, at, count); };
  return std::make_shared<ExpertMlpsImpl>(part(w1), part(b1), part(w2), part(b2), first);
}

}  // namespace distlab::experts
