#include "planner/piece_timing.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim/sgd.h>

#include "collectives/grad_norm.hpp"
#include "planner/timing.hpp"

namespace distlab::planner {

namespace {

// Calls `once(first)` (which returns the seconds it timed) at least 6
// times and until `seconds` are timed, at most 64; `first` is true of the
// first call, whose times are not kept (first touches, the allocator's caches).
template <typename Once>
void timed_rounds(double seconds, Once once) {
  double spent = 0;
  for (int round = 0; round < 64 && (round < 6 || spent < seconds); ++round) spent += once(round == 0);
}

// `piece`'s forward on `input` (a fresh leaf when it is a float tensor)
// under the precision's autocast, timed. Its gradients are kept: each
// backward adds into them, as a microbatch's does into the step's.
struct Forwarded {
  at::Tensor x, out;
  double seconds = 0;
};
Forwarded forward_of(torch::nn::AnyModule& piece, const at::Tensor& input, memory::Precision precision) {
  Forwarded f;
  f.x = input.is_floating_point() ? input.detach().requires_grad_(true) : input;
  const auto t0 = Clock::now();
  {
    memory::ComputeIn guard(precision, f.x.device().type());
    f.out = piece.forward(f.x);
  }
  f.seconds = since(t0);
  return f;
}

}  // namespace

models::TransformerLm piece_model(const ModelShape& m, memory::Recompute policy) {
  models::TransformerLmOptions o = m.lm;
  o.nlayers = 1;
  o.recompute = policy;
  models::TransformerLm lm(o);
  lm->train();
  return lm;
}

torch::nn::AnyModule& unit(torch::nn::Sequential& units, size_t i) { return *(units->begin() + static_cast<long>(i)); }

Timed time_piece(torch::nn::AnyModule& piece, const at::Tensor& input, memory::Precision precision,
                 const std::function<at::Tensor(const at::Tensor&)>& loss, double seconds, bool split) {
  std::vector<double> forwards, backwards;
  timed_rounds(seconds, [&](bool first) {
    const Forwarded f = forward_of(piece, input, precision);
    const auto t0 = Clock::now();
    loss(f.out).backward();
    const double backward = since(t0);
    if (!first) forwards.push_back(f.seconds), backwards.push_back(backward);
    return f.seconds + backward;
  });
  Timed out{median(forwards), median(backwards)};
  if (!split) return out;
  const std::vector<at::Tensor> parameters = piece.ptr()->parameters();
  std::vector<double> inputs, weights;
  timed_rounds(seconds, [&](bool first) {
    const Forwarded f = forward_of(piece, input, precision);
    const at::Tensor root = loss(f.out);
    const auto t0 = Clock::now();
    if (f.x.requires_grad()) (void)torch::autograd::grad({root}, {f.x}, {}, /*retain_graph=*/true);
    const double i = since(t0);
    const auto t1 = Clock::now();
    torch::autograd::backward({root}, {}, /*retain_graph=*/false, /*create_graph=*/false, parameters);
    const double w = since(t1);
    if (!first) inputs.push_back(i), weights.push_back(w);
    return i + w;
  });
  out.input = median(inputs);
  out.weight = median(weights);
  return out;
}

double time_update(torch::nn::AnyModule& piece, double seconds) {
  std::vector<at::Tensor> params = piece.ptr()->parameters();
  for (auto& p : params) p.mutable_grad() = at::randn_like(p);
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(1e-6));
  std::vector<double> times;
  timed_rounds(seconds, [&](bool first) {
    const auto t0 = Clock::now();
    (void)collectives::clip_grad_norm({{params, {}}}, 1e9);
    sgd.step();
    const double s = since(t0);
    if (!first) times.push_back(s);
    return s;
  });
  return median(times);
}

}  // namespace distlab::planner
