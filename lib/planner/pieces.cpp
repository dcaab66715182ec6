#include "planner/pieces.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cstdio>

#include "collectives/grad_norm.hpp"
#include "memory/precision.hpp"
#include "memory/recompute.hpp"
#include "planner/timing.hpp"
#include "train/batches.hpp"
#include "train/context_split.hpp"

namespace distlab::planner {

namespace {

constexpr int64_t kColumns[] = {1, 2, 4, 10, 20};

// The capstone's model with one layer, in training mode, cut into its
// units (models/transformer_lm.hpp): embedding, layer0, decoder, run by
// the model's own code.
torch::nn::Sequential piece_units(const ModelShape& m, memory::Recompute policy) {
  models::TransformerLmOptions o = m.lm;
  o.nlayers = 1;
  o.recompute = policy;
  models::TransformerLm lm(o);
  lm->train();
  return lm->units();
}

torch::nn::AnyModule& unit(torch::nn::Sequential& units, size_t i) { return *(units->begin() + static_cast<long>(i)); }

// Calls `once(first)` (which returns the seconds it timed) at least 6
// times and until `seconds` are timed, at most 64; `first` is true of the
// first call, whose times are not kept (first touches, the allocator's caches).
template <typename Once>
void timed_rounds(double seconds, Once once) {
  double spent = 0;
  for (int round = 0; round < 64 && (round < 6 || spent < seconds); ++round) spent += once(round == 0);
}

// `piece`'s forward on `input` (a fresh leaf when it is a float tensor)
// under the precision's autocast, its gradients cleared first, timed.
struct Forwarded {
  at::Tensor x, out;
  double seconds = 0;
};
Forwarded forward_of(torch::nn::AnyModule& piece, const at::Tensor& input, memory::Precision precision) {
  for (auto& p : piece.ptr()->parameters()) p.mutable_grad().reset();
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

// The median forward and backward seconds of `piece` on `input`, the
// backward from `loss` of its output (a gradient of the output's shape
// when the piece is not the last).
struct Timed {
  double forward = 0, backward = 0;
  double input = 0, weight = 0;  // with `split`
};
// With `split`, the backward also as a zero-bubble schedule's I and W
// (pipeline/executor.cpp): the input's gradient keeping the graph, then
// the parameters' gradients through it again (no I for an integer input:
// the first stage returns no gradient).
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

// The clipping's norm and SGD's step over the piece's parameters, as a step ends.
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

}  // namespace

std::string pieces_model(const ModelShape& m) {
  char text[256];
  std::snprintf(text, sizeof text, "d %lld, ffn %lld, %lld heads, vocabulary %lld, %lld tokens a column, dropout %g",
                (long long)m.lm.emsize, (long long)m.lm.nhid, (long long)m.lm.nhead, (long long)m.lm.ntokens,
                (long long)m.bptt, m.lm.dropout);
  std::string key = text;
  if (m.lm.moe.enabled())
    key += ", " + std::to_string(m.lm.moe.experts) + " experts (top " + std::to_string(m.lm.moe.top_k) + ")";
  return key;
}

void measure_pieces(const ModelShape& m, const PieceOptions& o, Profile& profile,
                    const std::function<void(const std::string&)>& say) {
  profile.pieces_model = pieces_model(m);
  const int64_t s = m.bptt, d = m.lm.emsize, V = m.lm.ntokens;
  const train::ContextSplit whole;  // one rank holds every token: the loss is the mean
  // One model per recomputation policy (matmuls is refused with experts),
  // timed at every size, thread count and precision.
  std::vector<std::pair<memory::Recompute, torch::nn::Sequential>> models;
  for (const memory::Recompute policy : {memory::Recompute::kNone, memory::Recompute::kFull,
                                         memory::Recompute::kSelective, memory::Recompute::kMatmuls})
    if (policy != memory::Recompute::kMatmuls || !m.lm.moe.enabled()) models.emplace_back(policy, piece_units(m, policy));
  for (const int threads : o.threads) {
    at::set_num_threads(threads);
    for (const std::string& name : o.precisions) {
      const memory::Precision precision = memory::precision_from(name);
      const auto t0 = Clock::now();
      for (const int64_t columns : kColumns) {
        const at::Tensor tokens = at::randint(V, {s, columns}, at::kLong);
        const at::Tensor hidden = at::randn({s, columns, d});
        const at::Tensor grad = at::randn({s, columns, d});
        auto push = [&](const std::string& piece, memory::Recompute policy, const Timed& t) {
          profile.pieces.push_back(
              {piece, name, memory::to_string(policy), threads, s * columns, t.forward, t.backward, t.input, t.weight});
        };
        auto into_grad = [&](const at::Tensor& out) { return (out.to(at::kFloat) * grad).sum(); };
        auto into_loss = [&](const at::Tensor& out) { return train::lm_loss(whole, out, tokens, s); };
        for (auto& [policy, units] : models) {
          const bool split = !memory::recomputes_parameters(policy);  // the executor's rule (StageModule::splits_backward)
          push("layer", policy, time_piece(unit(units, 1), hidden, precision, into_grad, o.seconds_per_point, split));
          if (policy != memory::Recompute::kNone) continue;
          push("embedding", policy, time_piece(unit(units, 0), tokens, precision, into_grad, o.seconds_per_point, true));
          push("decoder", policy, time_piece(unit(units, 2), hidden, precision, into_loss, o.seconds_per_point, true));
        }
      }
      char line[160];
      std::snprintf(line, sizeof line, "  %s on %d thread(s): embedding, layer (4 policies), decoder at 5 sizes (%.1f s)",
                    name.c_str(), threads, since(t0));
      say(line);
    }
    torch::nn::Sequential& units = models.front().second;  // no recomputation
    const char* names[] = {"embedding", "layer", "decoder"};
    for (size_t i = 0; i < 3; ++i)
      profile.updates.push_back({names[i], threads, time_update(unit(units, i), o.seconds_per_point)});
  }
}

void run_layer_steps(const ModelShape& m, int64_t columns, int steps) {
  torch::nn::Sequential units = piece_units(m, memory::Recompute::kNone);
  torch::nn::AnyModule& layer = unit(units, 1);
  const at::Tensor hidden = at::randn({m.bptt, columns, m.lm.emsize});
  for (int i = 0; i < steps; ++i) {
    at::Tensor x = hidden.detach().requires_grad_(true);
    layer.forward(x).sum().backward();
  }
}

}  // namespace distlab::planner
