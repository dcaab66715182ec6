#include "planner/pieces.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>

#include "memory/precision.hpp"
#include "memory/recompute.hpp"
#include "planner/piece_timing.hpp"
#include "planner/timing.hpp"
#include "train/batches.hpp"
#include "train/context_split.hpp"

namespace distlab::planner {

namespace {

constexpr int64_t kColumns[] = {1, 2, 4, 10, 20};

torch::nn::Sequential piece_units(const ModelShape& m, memory::Recompute policy) { return piece_model(m, policy)->units(); }

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

void run_layer_steps(const ModelShape& m, memory::Precision precision, int64_t columns, int steps) {
  torch::nn::Sequential units = piece_units(m, memory::Recompute::kNone);
  torch::nn::AnyModule& layer = unit(units, 1);
  const at::Tensor hidden = at::randn({m.bptt, columns, m.lm.emsize});
  for (int i = 0; i < steps; ++i) {
    at::Tensor x = hidden.detach().requires_grad_(true);
    at::Tensor out;
    {
      memory::ComputeIn guard(precision, x.device().type());
      out = layer.forward(x);
    }
    out.to(at::kFloat).sum().backward();
  }
}

}  // namespace distlab::planner
