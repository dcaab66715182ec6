// The dynamic loss scaler (memory/loss_scaler.hpp).
#include "memory/loss_scaler.hpp"

#include <cmath>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace distlab::memory {

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.init_scale) {
  if (!(options.init_scale > 0))
    throw std::invalid_argument("LossScaler: the initial scale must be positive, got " +
                                std::to_string(options.init_scale));
  if (!(options.growth_factor > 1))
    throw std::invalid_argument("LossScaler: the growth factor must be above 1, got " +
                                std::to_string(options.growth_factor));
  if (!(options.backoff_factor > 0 && options.backoff_factor < 1))
    throw std::invalid_argument("LossScaler: the backoff factor must lie in (0, 1), got " +
                                std::to_string(options.backoff_factor));
  if (options.growth_interval < 1)
    throw std::invalid_argument("LossScaler: the growth interval must be at least 1 step, got " +
                                std::to_string(options.growth_interval));
}

at::Tensor LossScaler::scale_loss(const at::Tensor& loss) const { return loss * scale_; }

void LossScaler::unscale(const std::vector<at::Tensor>& gradients) const {
  at::NoGradGuard no_grad;
  for (const at::Tensor& g : gradients)
    if (g.defined()) g.div_(scale_);
}

bool LossScaler::any_not_finite(const std::vector<at::Tensor>& gradients) {
  for (const at::Tensor& g : gradients)
    if (g.defined() && g.numel() > 0 && !at::isfinite(g).all().item<bool>()) return true;
  return false;
}

bool LossScaler::update(bool found_not_finite) {
  if (found_not_finite) {
    scale_ *= options_.backoff_factor;
    clean_in_a_row_ = 0;
    ++skipped_;
    return false;
  }
  if (++clean_in_a_row_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    clean_in_a_row_ = 0;
  }
  return true;
}

void LossScaler::restore(double scale, int64_t growth_tracker) {
  if (!(scale > 0)) throw std::invalid_argument("LossScaler: a restored scale must be positive");
  scale_ = scale;
  clean_in_a_row_ = growth_tracker;
}

std::string scale_text(double scale) {
  int exponent = 0;
  if (scale > 0 && std::frexp(scale, &exponent) == 0.5) return "2^" + std::to_string(exponent - 1);
  std::ostringstream out;
  out << scale;
  return out.str();
}

}  // namespace distlab::memory
