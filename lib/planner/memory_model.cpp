#include "planner/memory_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include "collectives/executor.hpp"
#include "collectives/plan.hpp"
#include "ddp/bucket_plan.hpp"
#include "memory/recompute.hpp"
#include "models/encoder_layer.hpp"
#include "models/parameter_count.hpp"
#include "models/split.hpp"
#include "pipeline/simulator.hpp"
#include "planner/schedule_shape.hpp"
#include "tensor_parallel/memory.hpp"
#include "train/stage_model.hpp"
#include "zero/shard_layout.hpp"

namespace distlab::planner {

namespace {

constexpr int64_t kFloat = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One layer's experts on a rank: E / N feed-forwards (d -> f -> d, with biases).
int64_t layer_expert_parameters(const ModelShape& m, int experts_over) {
  const int64_t d = m.lm.emsize, f = m.lm.nhid;
  return (f * d + f + d * f + d) * (m.lm.moe.experts / experts_over);
}

// One layer's tensors on one of T tensor ranks, in registration order (the
// header's list): in_proj's weight and bias, out_proj's (its bias whole),
// linear1's, linear2's (its bias whole), the two norms' weights and biases.
// With experts, a router (d -> E, no bias) in place of linear1 and linear2,
// and the experts apart (layer_expert_parameters).
std::vector<int64_t> layer_tensors(const ModelShape& m, int T) {
  const int64_t d = m.lm.emsize, f = m.lm.nhid;
  if (m.lm.moe.enabled()) return {3 * d * d / T, 3 * d / T, d * d / T, d, d * m.lm.moe.experts, d, d, d, d};
  return {3 * d * d / T, 3 * d / T, d * d / T, d, f * d / T, f / T, d * f / T, d, d, d, d, d};
}

// One layer's elements on one of T tensor ranks, with the experts it keeps.
int64_t layer_parameters(const ModelShape& m, int T, int experts_over) {
  const std::vector<int64_t> tensors = layer_tensors(m, T);
  const int64_t dense = std::accumulate(tensors.begin(), tensors.end(), int64_t{0});
  return dense + (m.lm.moe.enabled() ? layer_expert_parameters(m, experts_over) : 0);
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

// A stage's parameters on one tensor rank in registration order, one list
// per ZeRO-3 unit (zero/zero3.hpp): the embedding (V d), each layer's
// tensors (a layer with experts as one tensor), the decoder's weight and bias.
std::vector<std::vector<int64_t>> stage_units(const ModelShape& m, int stage, int stages, int T, int experts_over) {
  const int64_t d = m.lm.emsize, V = m.lm.ntokens;
  const auto [first, end] = stage_layers(m, stage, stages);
  std::vector<std::vector<int64_t>> units;
  if (stage == 0) units.push_back({V * d});
  for (int64_t layer = first; layer < end; ++layer) {
    if (m.lm.moe.enabled()) units.push_back({layer_parameters(m, T, experts_over)});
    else units.push_back(layer_tensors(m, T));
  }
  if (stage == stages - 1) units.push_back({V * d, V});
  return units;
}

// A stage's buckets under ZeRO-k (k = zero_stage, 1 to 3), elements each,
// in the order they are reduce-scattered, as ZeRO packs them
// (zero/shard_layout.hpp's plan_by_size, ZeroOptions' sizes): ZeRO-1 in
// registration order, ZeRO-2 in the backward's (the decoder's first, the
// embedding's last); ZeRO-3 a unit each.
std::vector<int64_t> zero_buckets(const std::vector<std::vector<int64_t>>& units, int zero_stage) {
  std::vector<int64_t> buckets;
  if (zero_stage == 3) {
    for (const auto& unit : units) buckets.push_back(std::accumulate(unit.begin(), unit.end(), int64_t{0}));
    return buckets;
  }
  std::vector<ddp::ParamInfo> infos;
  for (const auto& unit : units)
    for (int64_t t : unit) infos.push_back({"", t});
  const zero::BucketOrder order = zero_stage == 2 ? zero::BucketOrder::kBackward : zero::BucketOrder::kRegistration;
  for (const ddp::Bucket& b :
       zero::plan_by_size(infos, order, ddp::kDefaultFirstBucketBytes, ddp::kDefaultBucketCapBytes).buckets)
    buckets.push_back(b.numel);
  return buckets;
}

// What the ring's reductions leave on a rank of a stage under ZeRO-k: the
// calling thread's scratch (collectives/executor.hpp), as large as the
// largest chunk one reduce-scatter of a bucket receives, kept once it
// reaches kScratchKeptFromBytes.
int64_t zero_scratch_bytes(const std::vector<std::vector<int64_t>>& units, int zero_stage, int group) {
  if (zero_stage == 0 || group == 1) return 0;
  int64_t most = 0;
  for (int64_t n : zero_buckets(units, zero_stage)) {
    const int64_t bytes = kFloat * collectives::chunk_range(n, group, 0).count;
    if (bytes >= collectives::kScratchKeptFromBytes) most = std::max(most, bytes);
  }
  return most;
}

// ZeRO-3's backward of one unit (zero/zero3.hpp), at its gradients' end:
// the unit gathered whole, the next one (backward order) prefetched, and
// the flat copy of its gradients / p being made (the largest gradient's
// scaled copy beside it); with one microbatch the unit's own .grad too (with
// more, every unit's whole .grad is counted as gradients). The largest
// over the stage's units.
int64_t zero3_unit_scratch(const std::vector<std::vector<int64_t>>& units, bool own_gradient) {
  int64_t most = 0, next = 0;  // next: the unit the backward reaches after this one
  for (const auto& unit : units) {  // forward order: unit u's prefetch is u - 1, the one before
    int64_t whole = 0, largest = 0;
    for (int64_t t : unit) whole += t, largest = std::max(largest, t);
    most = std::max(most, kFloat * (whole + next + whole + largest + (own_gradient ? whole : 0)));
    next = whole;
  }
  return most;
}

}  // namespace

int64_t stage_parameters(const ModelShape& m, int stage, int stages, int tensor, int experts_over) {
  int64_t n = 0;
  for (const auto& unit : stage_units(m, stage, stages, tensor, experts_over))
    n += std::accumulate(unit.begin(), unit.end(), int64_t{0});
  return n;
}

namespace {
// One s b V float32 tensor of the last stage, for a microbatch of
// `columns`: the logits, their log-softmax, or the log-probabilities' gradient.
int64_t vocabulary_tensor_bytes(const ModelShape& m, const Choice& c, int64_t columns) {
  return kFloat * sequence_tokens(m, c.layout.context) * columns * m.lm.ntokens;
}

// U: the elements of one s b d tensor of a microbatch of `columns` on one
// rank (its s / C tokens of each column), a layer's output or its gradient.
int64_t hidden_elements(const ModelShape& m, const Choice& c, int64_t columns) {
  return sequence_tokens(m, c.layout.context) * columns * m.lm.emsize;
}
}  // namespace

int64_t stage_activation_bytes(const ModelShape& m, const Choice& c, int stage, int64_t columns) {
  const int stages = c.layout.pipeline * c.pipeline.stages_per_rank;
  const auto [first, end] = stage_layers(m, stage, stages);
  const int64_t s = sequence_tokens(m, c.layout.context);  // this rank's tokens of each column
  const int64_t U = hidden_elements(m, c, columns);
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
  // In 16 bits what reads a layer's float32 output keeps its 16-bit copy
  // (the next layer's in_proj, the decoder), not the output, which the
  // per-layer figure counts as a layer alone returns it: so do the first
  // stage's embedding output and every layer's but the one the executor
  // keeps to start the backward from (a stage's last, but on the last stage).
  if (c.memory.precision != memory::Precision::kFp32) {
    const int64_t outputs = (end - first) + (stage == 0 ? 1 : 0) - (stage < stages - 1 && end > first ? 1 : 0);
    bytes -= kFloat * outputs * U;
  }
  // The logits' log-softmax, which the loss keeps (the logits themselves
  // are freed once it is taken: nothing saves them).
  if (stage == stages - 1) bytes += vocabulary_tensor_bytes(m, c, columns);
  // In 16 bits the decoder's product keeps the 16-bit copies it made of
  // its weight and its input (memory/precision.hpp), a microbatch each.
  if (stage == stages - 1 && c.memory.precision != memory::Precision::kFp32)
    bytes += 2 * m.lm.emsize * (m.lm.ntokens + s * columns);
  return bytes;
}

int64_t recompute_bytes(const ModelShape& m, const Choice& c, int stage, int64_t columns) {
  const int stages = c.layout.pipeline * c.pipeline.stages_per_rank;
  const auto [first, end] = stage_layers(m, stage, stages);
  if (c.memory.recompute == memory::Recompute::kNone || end == first) return 0;
  Choice none = c;
  none.memory.recompute = memory::Recompute::kNone;
  return (stage_activation_bytes(m, none, stage, columns) - stage_activation_bytes(m, c, stage, columns)) / (end - first);
}

namespace {
// The backward's first steps through a stage's layers (the header's
// backward scratch on a stage before the last): `flowing` s b d gradients,
// the largest weight's gradient before it is added into .grad, and under
// recomputation the layer's tensors made again.
int64_t layers_backward_scratch(const ModelShape& m, const Choice& c, int stage, int64_t columns, int flowing) {
  return kFloat * (flowing * hidden_elements(m, c, columns) + m.lm.emsize * m.lm.nhid / c.layout.tensor) +
         recompute_bytes(m, c, stage, columns);
}
}  // namespace

int64_t backward_scratch_bytes(const ModelShape& m, const Choice& c, int stage, int64_t columns) {
  const int stages = c.layout.pipeline * c.pipeline.stages_per_rank;
  if (stage == stages - 1) return 2 * vocabulary_tensor_bytes(m, c, columns);
  return layers_backward_scratch(m, c, stage, columns, /*flowing=*/stage > 0 ? 3 : 2);
}

// The rank's peak while its stages are built (the header's build).
int64_t build_bytes(const ModelShape& m, const Choice& c, int rank) {
  const int stages = c.layout.pipeline * c.pipeline.stages_per_rank;
  const int64_t positional = kFloat * m.lm.max_len * m.lm.emsize;
  const int64_t whole = kFloat * stage_parameters(m, 0, 1, 1, 1) + positional;
  if (stages == 1 || models::count_parameters(m.lm) > train::kWholeModelInitLimit) return 0;
  int64_t built = 0, most = 0;
  for (int s = 0; s < stages; ++s) {
    if (pipeline::rank_of_stage(s, c.layout.pipeline, pipeline::placement_of(c.pipeline.schedule)) != rank) continue;
    built += kFloat * stage_parameters(m, s, stages, 1, 1) + (s == 0 ? positional : 0);
    most = std::max(most, whole + built);
  }
  return most;
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
  // The whole matrix beside the replica's columns while they are cut out
  // (contiguous() copies them); one replica's columns are the matrix itself.
  out.setup = replicas > 1 ? matrix(m.train_tokens, m.batch) : 0;
  return out;
}

namespace {
// A stage's whole .grad (elements) and its ZeRO-2 buckets (zero_buckets).
struct Zero2Stage {
  int stage = 0;
  int64_t psi = 0;
  std::vector<int64_t> buckets;
};

// What a moment of a rank holds beside its parameters, shards, buffers and
// data, by the header's categories (bytes).
struct Zero2Moment {
  int64_t gradients = 0, activations = 0, backward_scratch = 0;
  int64_t total() const { return gradients + activations + backward_scratch; }
};

// ZeRO-2's backward that reduces, the stage's last (the earlier ones
// accumulate under no_sync), at the hook of its largest gradient
// (zero/zero2.hpp): the embedding's, the first stage's last gradient, and
// the decoder weight's, the last stage's second. The gradient is final in
// .grad (the earlier microbatches' sum, added in place) while the hook's
// input, this microbatch's dense gradient, is still alive, and the hook
// makes the bucket it goes to, whole; the buckets launched before have
// landed. Every gradient not yet in a bucket is still whole in .grad,
// those of the rank's stages whose last backward comes later too; with one
// microbatch .grad is the dense gradient itself. What the rank's other
// stages hold then, and of this microbatch: on the first stage its output
// and the gradient received for it (2 s b d floats; none on a last stage),
// on the last stage all but the log-probabilities.
std::vector<Zero2Moment> zero2_moments(const ModelShape& m, const Choice& c, const Zero2Stage& z,
                                       const std::vector<Zero2Stage>& rank_stages, const HeldMicrobatches& held,
                                       int rank, const std::vector<std::vector<int64_t>>& held_bytes,
                                       const std::vector<int64_t>& sizes) {
  const int stages = c.layout.pipeline * c.pipeline.stages_per_rank;
  const bool summed = sizes.size() > 1;
  const double end = held.last_release(z.stage);
  int64_t later = 0;  // the .grad of the rank's stages that reduce after this one
  for (const Zero2Stage& o : rank_stages)
    if (summed && o.stage != z.stage && held.last_release(o.stage) > end) later += o.psi;
  const int64_t others = held.others_before(rank, z.stage, end, held_bytes);
  const int64_t columns = sizes.back();  // the last microbatch's
  const int64_t Vd = m.lm.ntokens * m.lm.emsize;
  std::vector<Zero2Moment> moments;
  if (z.stage == 0) {
    Zero2Moment embedding;
    embedding.gradients = kFloat * (later + (summed ? Vd : 0) + z.buckets.back());
    embedding.backward_scratch = kFloat * Vd;
    embedding.activations = others + (stages > 1 ? kFloat * 2 * hidden_elements(m, c, columns) : 0);
    moments.push_back(embedding);
  }
  if (z.stage == stages - 1) {
    Zero2Moment decoder;
    decoder.gradients = kFloat * (later + (summed ? z.psi - m.lm.ntokens : 0) + z.buckets.front());
    decoder.backward_scratch = kFloat * Vd;
    // In float32 the logits' gradient is the decoder's input gradient until
    // its node is done; in 16 bits the product's own backward (memory/
    // precision.hpp) has let it go.
    decoder.activations = others + stage_activation_bytes(m, c, z.stage, columns) -
                          (c.memory.precision == memory::Precision::kFp32 ? 0 : vocabulary_tensor_bytes(m, c, columns));
    moments.push_back(decoder);
  }
  return moments;
}
}  // namespace

MemoryPrediction predict_memory(const ModelShape& m, const Choice& c) {
  const train::Layout& l = c.layout;
  const int P = l.pipeline, stages = P * c.pipeline.stages_per_rank;
  const int averaging = l.replicas * l.context;  // the ranks a stage's gradients average over
  const int64_t columns = microbatch_columns(m, l.replicas, c.pipeline.microbatches);
  const int microbatches = static_cast<int>(std::min<int64_t>(c.pipeline.microbatches, m.batch / l.replicas));
  const HeldMicrobatches& held = held_microbatches(c.pipeline.schedule, P, c.pipeline.stages_per_rank, microbatches,
                                                   !memory::recomputes_parameters(c.memory.recompute));
  // The microbatches a stage holds are taken as the largest ones (the
  // first: tensor_split gives them the extra columns), which the peak
  // window of every schedule here includes.
  const std::vector<int64_t> sizes = microbatch_sizes(m, l.replicas, microbatches);
  const int64_t optimizer_bytes = 0;  // the trainer's plain SGD
  const DataBytes data = data_bytes(m, l.replicas);
  MemoryPrediction out;
  for (int r = 0; r < P; ++r) {
    RankMemory mem;
    mem.pipeline_rank = r;
    mem.data = data.kept;
    mem.data_setup = data.setup;
    bool holds_first = false, holds_last = false;
    int64_t scratch = 0;
    int64_t past_loss = 0;  // the backward scratch of the moments after the loss
    std::vector<Zero2Stage> zero2_stages;
    std::vector<std::vector<int64_t>> held_bytes(static_cast<size_t>(stages), std::vector<int64_t>(sizes.size() + 1, 0));
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
      // (ZeRO-2's and -3's: below, by moment; ZeRO-1's are its flat
      // buckets, made with the stage: buffers); ZeRO-2 and -3 also hold
      // their shard from the start.
      if (c.data.zero == 1) mem.buffers += kFloat * psi;
      else mem.gradients += kFloat * psi;
      if (c.data.zero >= 2) mem.gradient_shard += kFloat * shard;
      mem.optimizer_state += optimizer_bytes * (c.data.zero >= 1 ? shard : psi);
      if (s == 0) mem.buffers += kFloat * m.lm.max_len * m.lm.emsize;  // the positional table
      // DDP's buckets, a copy of every gradient (made whatever the group's
      // size; not of the spread experts, which it leaves alone).
      if (c.data.zero == 0) mem.buffers += kFloat * (psi - spread);
      // ZeRO's reductions run on one thread a rank: its scratch is the
      // largest the rank's stages ask for.
      const auto units = stage_units(m, s, stages, l.tensor, N);
      scratch = std::max(scratch, zero_scratch_bytes(units, c.data.zero, averaging));
      if (c.data.zero == 3) past_loss = std::max(past_loss, zero3_unit_scratch(units, microbatches == 1));
      if (c.data.zero == 2) zero2_stages.push_back({s, psi, zero_buckets(units, 2)});
      // The last stage's layers after the loss: the flowing gradients and
      // a recomputed layer's tensors, as on any other stage.
      if (s == stages - 1) past_loss = std::max(past_loss, layers_backward_scratch(m, c, s, columns, /*flowing=*/3));
      std::vector<int64_t>& bytes = held_bytes[static_cast<size_t>(s)];
      for (size_t k = 0; k < sizes.size(); ++k) bytes[k + 1] = bytes[k] + stage_activation_bytes(m, c, s, sizes[k]);
      // The backward's first steps (the header's backward scratch).
      mem.backward_scratch = std::max(mem.backward_scratch, backward_scratch_bytes(m, c, s, columns));
      holds_first = holds_first || s == 0;
      holds_last = holds_last || s == stages - 1;
    }
    mem.buffers += scratch;
    mem.build = build_bytes(m, c, r);
    const auto [bytes, count] = held.peak(r, held_bytes);
    mem.activations = bytes;
    mem.microbatches_held = count;
    // ZeRO-2's and ZeRO-3's whole .grad exists from the step's first
    // backward until the last one reduce-scatters it (zero/zero3.hpp's
    // accumulation under no_sync): with one microbatch never beside the
    // activations; with more, the peak is the first backward's (no .grad
    // yet) or a later one's (.grad whole, with what is held then).
    if (c.data.zero >= 2) {
      const auto [later, later_count] = held.peak(r, held_bytes, /*after_first_release=*/true);
      if (microbatches > 1 && later + mem.gradients > bytes) {
        mem.activations = later;
        mem.microbatches_held = later_count;
      } else {
        mem.gradients = 0;
      }
    }
    // Past the loss (ZeRO-3's unit moment, the last stage's layers), when it
    // is the larger: the log-probabilities are freed by then.
    const int64_t log_probabilities = holds_last ? vocabulary_tensor_bytes(m, c, sizes.front()) : 0;
    if (past_loss - log_probabilities > mem.backward_scratch) {
      mem.activations -= log_probabilities;
      mem.backward_scratch = past_loss;
    }
    // The embedding's backward, when it is the larger moment: the first
    // microbatch's layers freed, the dense gradient made.
    if (holds_first) {
      const int64_t U = hidden_elements(m, c, sizes.front());
      const int64_t layers = stage_activation_bytes(m, c, 0, sizes.front()) - kFloat * 3 * U;
      const int64_t dense = kFloat * (m.lm.ntokens * m.lm.emsize + U);
      if (dense - layers > mem.backward_scratch) {
        mem.activations -= layers;
        mem.backward_scratch = dense;
      }
    }
    // ZeRO-2's backward that reduces, when it is the larger moment.
    for (const Zero2Stage& z : zero2_stages)
      for (const Zero2Moment& moment : zero2_moments(m, c, z, zero2_stages, held, r, held_bytes, sizes))
        if (moment.total() > mem.gradients + mem.activations + mem.backward_scratch) {
          mem.gradients = moment.gradients;
          mem.activations = moment.activations;
          mem.backward_scratch = moment.backward_scratch;
        }
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
