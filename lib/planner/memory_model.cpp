#include "planner/memory_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>

#include "memory/recompute.hpp"
#include "models/encoder_layer.hpp"
#include "models/split.hpp"
#include "pipeline/simulator.hpp"
#include "planner/schedule_shape.hpp"
#include "tensor_parallel/memory.hpp"

namespace distlab::planner {

namespace {

constexpr int64_t kFloat = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One layer's experts on a rank: E / N feed-forwards (d -> f -> d, with biases).
int64_t layer_expert_parameters(const ModelShape& m, int experts_over) {
  const int64_t d = m.lm.emsize, f = m.lm.nhid;
  return (f * d + f + d * f + d) * (m.lm.moe.experts / experts_over);
}

// One layer's elements on one of T tensor ranks (the header's list).
int64_t layer_parameters(const ModelShape& m, int T, int experts_over) {
  const int64_t d = m.lm.emsize, f = m.lm.nhid;
  const int64_t attention = (3 * d * d + 3 * d) / T + d * d / T + d;  // in_proj cut, out_proj's weight cut, its bias whole
  const int64_t norms = 4 * d;
  if (!m.lm.moe.enabled()) return attention + norms + (f * d + f) / T + d * f / T + d;
  // Experts: a router (d -> E, no bias) and the experts this rank keeps.
  return attention + norms + d * m.lm.moe.experts + layer_expert_parameters(m, experts_over);
}

// A stage's layers, [first, end).
std::pair<int64_t, int64_t> stage_layers(const ModelShape& m, int stage, int stages) {
  return models::split_layers(m.lm.nlayers, stages).at(static_cast<size_t>(stage));
}

// The elements of a stage's experts this rank keeps when they are spread
// over N > 1 ranks (none otherwise: they are then averaged with the rest).
int64_t stage_spread_parameters(const ModelShape& m, int stage, int stages, int experts_over) {
  if (!m.lm.moe.enabled() || experts_over <= 1) return 0;
  const auto [first, end] = stage_layers(m, stage, stages);
  return (end - first) * layer_expert_parameters(m, experts_over);
}

}  // namespace

int64_t stage_parameters(const ModelShape& m, int stage, int stages, int tensor, int experts_over) {
  const auto [first, end] = stage_layers(m, stage, stages);
  int64_t n = (end - first) * layer_parameters(m, tensor, experts_over);
  if (stage == 0) n += m.lm.ntokens * m.lm.emsize;                       // the embedding
  if (stage == stages - 1) n += m.lm.ntokens * m.lm.emsize + m.lm.ntokens;    // the decoder
  return n;
}

namespace {
// One s b V float32 tensor of the last stage, for a microbatch of
// `columns`: the logits, their log-softmax, or the log-probabilities' gradient.
int64_t vocabulary_tensor_bytes(const ModelShape& m, const Choice& c, int64_t columns) {
  return kFloat * sequence_tokens(m, c.layout.context) * columns * m.lm.ntokens;
}
}  // namespace

int64_t stage_activation_bytes(const ModelShape& m, const Choice& c, int stage, int64_t columns) {
  const int stages = c.layout.pipeline * c.pipeline.stages_per_rank;
  const auto [first, end] = stage_layers(m, stage, stages);
  const int64_t s = sequence_tokens(m, c.layout.context);  // this rank's tokens of each column
  const int64_t U = s * columns * m.lm.emsize;
  const bool dropout = m.lm.dropout > 0;
  const tensor_parallel::LayerShape layer{s, columns, m.lm.emsize, m.lm.nhead, m.lm.nhid};
  int64_t per_layer = 0;
  if (c.layout.tensor == 1) {
    per_layer = models::activation_bytes(layer, c.memory.recompute, dropout, memory::generator_state_bytes(), c.memory.precision);
  } else {
    const int64_t none = tensor_parallel::distlab_activation_bytes(layer, c.layout.tensor, false, dropout).total();
    const int64_t A = m.lm.nhead * s * s * columns;
    if (c.memory.recompute == memory::Recompute::kFull) per_layer = kFloat * U + memory::generator_state_bytes();
    else if (c.memory.recompute == memory::Recompute::kSelective)
      per_layer = none - kFloat * (dropout ? 3 : 1) * A / c.layout.tensor + memory::generator_state_bytes();
    else per_layer = none;
  }
  int64_t bytes = (end - first) * per_layer;
  if (stage == 0) bytes += kFloat * 3 * U;  // the embedding scaled, its dropout noise and output
  else bytes += kFloat * U;                 // the received activation, the stage's input
  if (stage == stages - 1) bytes += 2 * vocabulary_tensor_bytes(m, c, columns);  // logits and their log-softmax
  return bytes;
}

const RankMemory& MemoryPrediction::worst() const {
  return *std::max_element(ranks.begin(), ranks.end(),
                           [](const RankMemory& a, const RankMemory& b) { return a.total() < b.total(); });
}

DataBytes data_bytes(const ModelShape& m, int replicas) {
  constexpr int64_t kToken = 8;  // int64
  // data::batchify: T / b rows of b columns, the rest dropped.
  auto matrix = [](int64_t tokens, int64_t columns) { return tokens / columns * columns * kToken; };
  const int64_t rows = m.train_tokens / m.batch;
  DataBytes out;
  out.kept = rows * replica_columns(m, replicas) * kToken + matrix(m.valid_tokens, m.eval_batch) +
             matrix(m.test_tokens, m.eval_batch);
  out.setup = matrix(m.train_tokens, m.batch);
  return out;
}

MemoryPrediction predict_memory(const ModelShape& m, const Choice& c) {
  const train::Layout& l = c.layout;
  const int P = l.pipeline, stages = P * c.pipeline.stages_per_rank;
  const int averaging = l.replicas * l.context;  // the ranks a stage's gradients average over
  const int64_t columns = microbatch_columns(m, l.replicas, c.pipeline.microbatches);
  const HeldMicrobatches& held = held_microbatches(c.pipeline.schedule, P, c.pipeline.stages_per_rank,
                                                   static_cast<int>(std::min<int64_t>(c.pipeline.microbatches, m.batch / l.replicas)));
  const int64_t optimizer_bytes = 0;  // the trainer's plain SGD
  const DataBytes data = data_bytes(m, l.replicas);
  MemoryPrediction out;
  for (int r = 0; r < P; ++r) {
    RankMemory mem;
    mem.pipeline_rank = r;
    mem.data = data.kept;
    mem.data_setup = data.setup;
    std::vector<int64_t> per_microbatch(static_cast<size_t>(stages), 0);
    for (int s = 0; s < stages; ++s) {
      if (pipeline::rank_of_stage(s, P, pipeline::placement_of(c.pipeline.schedule)) != r) continue;
      const int64_t psi = stage_parameters(m, s, stages, l.tensor, c.experts.parallel);
      // ZeRO shards spread experts over the ranks holding the same ones
      // (averaging / N), everything else over the averaging group.
      const int N = c.experts.parallel;
      const int64_t spread = stage_spread_parameters(m, s, stages, N);
      const int64_t shard = ceil_div(psi - spread, averaging) + (spread > 0 ? ceil_div(spread, averaging / N) : 0);
      // ZeRO-3 leaves spread experts whole (their own ZeRO-2 shards their
      // gradients and optimizer state).
      mem.parameters += kFloat * (c.data.zero == 3 ? ceil_div(psi - spread, averaging) + spread : psi);
      // .grad sums the microbatches whole (no_sync) under every strategy
      // but ZeRO-3 (there: the experts'); ZeRO-2 and -3 also hold their
      // shard from the start.
      mem.gradients += kFloat * (c.data.zero == 3 ? spread : psi);
      if (c.data.zero >= 2) mem.gradient_shard += kFloat * shard;
      mem.optimizer_state += optimizer_bytes * (c.data.zero >= 1 ? shard : psi);
      if (s == 0) mem.buffers += kFloat * m.lm.max_len * m.lm.emsize;  // the positional table
      // DDP's buckets (made whatever the group's size; not of the spread
      // experts, which it leaves alone), ZeRO-1's flat buckets
      // reduce-scattered after the step (the experts' ZeRO-1 has its own):
      // a copy of every gradient.
      if (c.data.zero == 0) mem.buffers += kFloat * (psi - spread);
      if (c.data.zero == 1) mem.buffers += kFloat * psi;
      per_microbatch[static_cast<size_t>(s)] = stage_activation_bytes(m, c, s, columns);
      if (s == stages - 1) mem.loss_gradient = vocabulary_tensor_bytes(m, c, columns);
    }
    const auto [bytes, count] = held.peak(r, per_microbatch);
    mem.activations = bytes;
    mem.microbatches_held = count;
    out.ranks.push_back(mem);
  }
  return out;
}

std::string bytes_text(int64_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int u = 0;
  while (u < 4 && std::fabs(value) >= 1024) value /= 1024, ++u;
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", value, units[u]);
  return text;
}

int64_t parse_bytes(const std::string& text) {
  const std::string forms = " (examples: 2GB, 512MB, 1.5G, 64M, 1048576)";
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument("'" + text + "' is not a size" + forms);
  }
  std::string unit = text.substr(used);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") scale = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") scale = 1024.0 * 1024 * 1024;
  // At least a byte and at most an exbibyte: a double past int64's range
  // ("1e300", "inf") has no int64 to become.
  if (scale == 0 || !(value * scale >= 1 && value * scale <= 0x1p60))
    throw std::invalid_argument("'" + text + "' is not a size from 1 byte to 1 EiB" + forms);
  return static_cast<int64_t>(value * scale);
}

}  // namespace distlab::planner
