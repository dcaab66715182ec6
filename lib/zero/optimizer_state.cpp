#include "zero/optimizer_state.hpp"

#include "compat/torch.hpp"

#include <memory>
#include <stdexcept>

namespace distlab::zero {
namespace {

// LibTorch keys the state by the parameter's TensorImpl (compat/torch.hpp).
auto key_of(const at::Tensor& param) { return compat::optimizer_state_key(param.unsafeGetTensorImpl()); }

template <typename State>
ElementState adam_like(const State& s) {
  ElementState out{true, s.step(), {{"exp_avg", s.exp_avg()}, {"exp_avg_sq", s.exp_avg_sq()}}};
  if (s.max_exp_avg_sq().defined()) out.fields["max_exp_avg_sq"] = s.max_exp_avg_sq();
  return out;
}

template <typename State>
std::unique_ptr<State> make_adam_like(const ElementState& s) {
  auto state = std::make_unique<State>();
  state->step(s.step);
  state->exp_avg(s.fields.at("exp_avg"));
  state->exp_avg_sq(s.fields.at("exp_avg_sq"));
  if (s.fields.count("max_exp_avg_sq")) state->max_exp_avg_sq(s.fields.at("max_exp_avg_sq"));
  return state;
}

}  // namespace

std::string to_string(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kAdamW: return "adamw";
  }
  return "?";
}

OptimizerKind optimizer_kind(torch::optim::Optimizer& optimizer, const std::string& who) {
  if (dynamic_cast<torch::optim::SGD*>(&optimizer) != nullptr) return OptimizerKind::kSgd;
  if (dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr) return OptimizerKind::kAdam;
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr) return OptimizerKind::kAdamW;
  throw std::invalid_argument(who + ": the optimizer is not SGD, Adam or AdamW, whose state this knows");
}

ElementState element_state(torch::optim::Optimizer& optimizer, OptimizerKind kind, const at::Tensor& param) {
  auto& state = optimizer.state();
  const auto it = state.find(key_of(param));
  if (it == state.end()) return {};
  switch (kind) {
    case OptimizerKind::kSgd: {
      const auto& s = static_cast<const torch::optim::SGDParamState&>(*it->second);
      return {true, 0, {{"momentum_buffer", s.momentum_buffer()}}};
    }
    case OptimizerKind::kAdam: return adam_like(static_cast<const torch::optim::AdamParamState&>(*it->second));
    case OptimizerKind::kAdamW: return adam_like(static_cast<const torch::optim::AdamWParamState&>(*it->second));
  }
  return {};
}

void set_element_state(torch::optim::Optimizer& optimizer, OptimizerKind kind, const at::Tensor& param,
                       const ElementState& s) {
  auto& state = optimizer.state();
  const auto key = key_of(param);
  if (!s.present) {
    state.erase(key);
    return;
  }
  if (kind == OptimizerKind::kSgd) {
    auto sgd = std::make_unique<torch::optim::SGDParamState>();
    sgd->momentum_buffer(s.fields.at("momentum_buffer"));
    state[key] = std::move(sgd);
  } else if (kind == OptimizerKind::kAdam) {
    state[key] = make_adam_like<torch::optim::AdamParamState>(s);
  } else {
    state[key] = make_adam_like<torch::optim::AdamWParamState>(s);
  }
}

}  // namespace distlab::zero
