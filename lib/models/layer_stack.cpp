// The measured layer stack (models/layer_stack.hpp).
#include "models/layer_stack.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "memory/allocator_meter.hpp"
#include "models/encoder_layer.hpp"

namespace distlab::models {

LayerStack::LayerStack(const LayerStackOptions& o) : options_(o) {
  if (o.heads < 1 || o.hidden % o.heads != 0)
    throw std::invalid_argument("LayerStack: " + std::to_string(o.heads) + " heads do not divide the width " +
                                std::to_string(o.hidden));
  at::NoGradGuard no_grad;
  for (int64_t i = 0; i < o.layers; ++i) {
    layers_.emplace_back(
        torch::nn::TransformerEncoderLayerOptions(o.hidden, o.heads).dim_feedforward(o.ffn).dropout(o.dropout));
    at::Generator g = at::detail::createCPUGenerator(o.seed + static_cast<uint64_t>(i));
    // Matrices uniform in +-1/sqrt(fan in), biases in +-0.1, the norms'
    // weights near 1 (they pass the signal on).
    for (auto& item : layers_.back()->named_parameters()) {
      at::Tensor& p = item.value();
      const double bound = p.dim() >= 2 ? 1 / std::sqrt(static_cast<double>(p.size(-1))) : 0.1;
      p.uniform_(-bound, bound, g);
      if (item.key().rfind("norm", 0) == 0 && item.key().find("weight") != std::string::npos) p.add_(1.0);
      parameters_.push_back(p);
      count_ += p.numel();
    }
  }
}

const at::Tensor& LayerStack::mask_for(int64_t s) {
  if (!mask_.defined() || mask_.size(0) != s)
    mask_ = at::triu(at::full({s, s}, -std::numeric_limits<float>::infinity()), 1);
  return mask_;
}

at::Tensor LayerStack::forward(const at::Tensor& x, memory::Recompute policy) {
  const at::Tensor& mask = mask_for(x.size(0));
  at::Tensor h = x;
  for (auto& layer : layers_) h = run_encoder_layer(*layer, h, mask, policy);
  return h;
}

int64_t LayerStack::kept_bytes(const at::Tensor& x, memory::Recompute policy, memory::Precision precision) {
  auto& meter = memory::AllocatorMeter::install();
  mask_for(x.size(0));
  const int64_t before = meter.allocated();
  memory::ComputeIn guard(precision, x.device().type());
  const at::Tensor out = forward(x, policy);
  return meter.allocated() - before;
}

int64_t LayerStack::kept_formula(const at::Tensor& x, memory::Recompute policy, memory::Precision precision) const {
  const LayerStackOptions& o = options_;
  const int64_t s = x.size(0), b = x.size(1), u = s * b * o.hidden;
  const tensor_parallel::LayerShape shape{s, b, o.hidden, o.heads, o.ffn};
  int64_t kept = o.layers * activation_bytes(shape, policy, o.dropout > 0, memory::generator_state_bytes(), precision);
  const bool plain = policy == memory::Recompute::kNone || policy == memory::Recompute::kSelective;
  if (precision != memory::Precision::kFp32 && plain) {
    kept -= (o.layers - 1) * 4 * u;
    if (!x.requires_grad()) kept -= 2 * 3 * o.hidden * o.hidden;
  }
  return kept;
}

double LayerStack::step_seconds(const at::Tensor& x, memory::Recompute policy, memory::Precision precision) {
  zero_grad();
  const auto start = std::chrono::steady_clock::now();
  at::Tensor out;
  {
    memory::ComputeIn guard(precision, x.device().type());
    out = forward(x, policy);
  }
  out.to(at::kFloat).pow(2).mean().backward();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void LayerStack::zero_grad() {
  for (at::Tensor& p : parameters_) p.mutable_grad().reset();
}

std::vector<at::Tensor> LayerStack::gradients() const {
  std::vector<at::Tensor> g;
  for (const at::Tensor& p : parameters_) g.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  return g;
}

at::Tensor layer_stack_input(int64_t seq, int64_t batch, int64_t hidden) {
  return at::randn({seq, batch, hidden}, at::detail::createCPUGenerator(99));
}

}  // namespace distlab::models
