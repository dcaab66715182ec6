#include "planner/step_time.hpp"

#include <algorithm>
#include <cmath>

#include "memory/flops.hpp"
#include "memory/recompute.hpp"
#include "models/encoder_layer.hpp"
#include "models/split.hpp"
#include "pipeline/simulator.hpp"
#include "planner/memory_model.hpp"
#include "planner/pieces.hpp"
#include "planner/shared_cores.hpp"

namespace distlab::planner {

namespace {

constexpr int64_t kFloat = 4;
// The operations a layer's forward dispatches (models/encoder_layer.hpp's
// list: the products, the views and transposes around the heads, the
// scale, the mask, softmax, three dropouts of two operations each, the
// residual adds, two norms); its backward dispatches about twice as many.
constexpr double kLayerForwardOps = 30;
// The embedding (look-up, scale, add the positions, dropout) and the
// decoder with its loss (product, log-softmax, the negative log-likelihood).
constexpr double kEmbeddingOps = 5, kDecoderOps = 4;
constexpr int64_t kBucketBytes = 25 << 20;  // DDP's bucket cap (ddp/reducer.hpp)

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

double collective_seconds(const Profile& profile, const std::string& backend, collectives::Collective collective,
                          int ranks, int64_t bytes, int world) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const char* name = collective == collectives::Collective::kAllReduce       ? "all_reduce"
                     : collective == collectives::Collective::kAllGather     ? "all_gather"
                     : collective == collectives::Collective::kReduceScatter ? "reduce_scatter"
                                                                              : "";
  bool measured = false;
  for (const LinkPoint& p : profile.links) measured = measured || (p.backend == backend && p.collective == name && p.ranks == ranks);
  if (measured) {
    const collectives::LinkParams link = profile.link(backend, name, ranks, world);
    return link.alpha_s + double(bytes) * link.beta_s_per_byte;
  }
  const collectives::LinkParams link = profile.link(backend, "p2p", 2, world);
  const int64_t count = std::max<int64_t>(1, bytes / kFloat);
  const collectives::Plan plan = collectives::make_plan(collective, collectives::Algorithm::kRing, ranks, count);
  return collectives::predict(plan, link).total_seconds;
}

namespace {

// One layer's forward on one rank added up from its parts: every product's
// FLOPs over the profile's throughput at its shape, the element-wise bytes
// over the bandwidth, the operations' fixed cost; what it waits for
// inside (tensor-parallel all-reduces, the context ring, the experts'
// all-to-alls); and what its recomputation runs again.
struct LayerParts {
  double compute = 0;     // the forward's products, bytes and operations
  double products = 0;    // of which the products
  double elementwise = 0; // and the rest
  double comm = 0;        // what it waits for, each way: cut_comm + expert_comm
  double cut_comm = 0;    // of which the tensor all-reduces and the context exchanges
  double expert_comm = 0; // and the experts' all-to-alls
  double again = 0;       // the recomputed part, run again in the backward
};

LayerParts layer_added_up(const ModelShape& m, const Choice& c, const Profile& profile, const std::string& backend,
                          int T, int C, int64_t columns) {
  const std::string precision = memory::to_string(c.memory.precision);
  const int64_t s = sequence_tokens(m, C);
  const int64_t tokens = s * columns, d = m.lm.emsize, f = m.lm.nhid;
  auto product = [&](int64_t rows, int64_t k, int64_t n) {
    return 2.0 * double(rows) * double(k) * double(n) / profile.matmul_flops(rows, k, n, precision);
  };
  auto elementwise = [&](double bytes) { return bytes / profile.elementwise_bytes_per_second; };
  const double projections = product(tokens, d, 3 * d / T) + product(tokens, d / T, d);
  // The attention core: per column and head of this rank, q k^T and the
  // weights times v, this rank's s tokens attending the whole sequence.
  const double core = 2 * product(s, d / m.lm.nhead, m.bptt) * double(columns * std::max<int64_t>(1, m.lm.nhead / T));
  double feed_forward = 0;
  if (m.lm.moe.enabled()) {
    feed_forward = product(tokens, d, m.lm.moe.experts) + m.lm.moe.top_k * (product(tokens, d, f) + product(tokens, f, d));
  } else {
    feed_forward = product(tokens, d, f / T) + product(tokens, f / T, d);
  }
  const int world = c.layout.world_size();
  const tensor_parallel::LayerShape shape{s, columns, d, m.lm.nhead, f};
  const double kept =
      double(models::activation_bytes(shape, memory::Recompute::kNone, m.lm.dropout > 0, 0, c.memory.precision)) / T;
  const double casts = c.memory.precision == memory::Precision::kFp32 ? 0 : 12;  // each product's inputs cast
  LayerParts out;
  out.products = projections + core + feed_forward;
  out.elementwise = elementwise(2 * kept) + (kLayerForwardOps + casts) * profile.op_seconds;
  out.compute = out.products + out.elementwise;
  if (T > 1)
    out.cut_comm += 2 * collective_seconds(profile, backend, collectives::Collective::kAllReduce, T, tokens * d * kFloat, world);
  if (C > 1) {
    const collectives::LinkParams link = profile.link(backend, "p2p", 2, world);
    out.cut_comm += double(C - 1) * (link.alpha_s + double(2 * tokens * d * kFloat) * link.beta_s_per_byte);
  }
  if (c.experts.parallel > 1) {
    const collectives::LinkParams link = profile.link(backend, "p2p", 2, world);
    const int N = c.experts.parallel;
    out.expert_comm =
        2 * double(N - 1) * (link.alpha_s + double(tokens * m.lm.moe.top_k * d * kFloat / N) * link.beta_s_per_byte);
  }
  out.comm = out.cut_comm + out.expert_comm;
  if (c.memory.recompute == memory::Recompute::kFull) out.again = out.compute + out.comm;
  if (c.memory.recompute == memory::Recompute::kSelective) out.again = core + 6 * profile.op_seconds;
  if (c.memory.recompute == memory::Recompute::kMatmuls) out.again = out.elementwise;
  return out;
}

// The clipping's norm and SGD's step over stage `st`'s parameters on one
// rank (`bytes` of them): the measured pieces' updates (a cut layer's
// share of its parameters, ZeRO's shard of them), else their bytes read
// and written and a few operations per tensor.
double update_seconds(const ModelShape& m, const Choice& c, const Profile& profile, int st, int64_t bytes) {
  const int stages = c.layout.pipeline * c.pipeline.stages_per_rank;
  const auto [first, end] = models::split_layers(m.lm.nlayers, stages).at(static_cast<size_t>(st));
  const double shard = c.data.zero >= 1 ? 1.0 / double(c.layout.replicas * c.layout.context) : 1.0;
  if (profile.updates.empty())
    return shard * double(3 * bytes) / profile.elementwise_bytes_per_second +
           2 * profile.op_seconds * double(1 + 12 * (end - first));
  const int threads = threads_per_rank(profile, c.layout.world_size());
  double seconds = double(end - first) * profile.update_seconds("layer", threads) / c.layout.tensor;
  if (st == 0) seconds += profile.update_seconds("embedding", threads);
  if (st == stages - 1) seconds += profile.update_seconds("decoder", threads);
  return shard * seconds;
}

// One layer on this rank from the profile's pieces, its messages included
// (forward, backward and I; W is not read: a stage's W is its whole
// backward, split_backward):
// the whole layer's measured seconds at the rank's tokens; a layer cut over
// T tensor ranks and holding 1/C of each sequence times the measured cut
// layer's ratio to the whole one at the same tokens (both fp32 on one
// thread; the cut measured on its T x C ranks with copies beside it up to
// the layout's world, their sharing of the cores then taken out: the
// replay on shared cores puts back the sharing of the ranks busy at each
// moment). A cut the profile did not measure (one of 3, 5, 6 or 7 ranks):
// the whole layer scaled as the added-up compute of the cut layer is to
// the whole one's, plus the cost model's messages. The experts'
// all-to-alls from the cost model either way.
PieceSeconds layer_seconds(const ModelShape& m, const Choice& c, const Profile& profile, const std::string& backend,
                           int64_t columns, const LayerParts& parts) {
  const int T = c.layout.tensor, C = c.layout.context;
  const std::string precision = memory::to_string(c.memory.precision);
  const std::string recompute = memory::to_string(c.memory.recompute);
  const double tokens = double(sequence_tokens(m, C) * columns);
  PieceSeconds out =
      profile.piece_seconds("layer", precision, recompute, threads_per_rank(profile, c.layout.world_size()), tokens);
  const double twice = c.memory.recompute == memory::Recompute::kFull ? 2 : 1;  // a recomputed layer talks again
  const Cut cut{T, C};
  const int world = T * C > 1 ? profile.cut_world("fp32", recompute, cut, c.layout.world_size()) : 0;
  if (world > 0) {  // the cut measured
    const PieceSeconds whole = profile.piece_seconds("layer", "fp32", recompute, 1, tokens);
    const PieceSeconds measured = profile.piece_seconds("layer", "fp32", recompute, 1, tokens, cut, world);
    const double shared = profile.slowdown(world, "fp32");  // the cut was measured in fp32
    auto ratio = [&](double a, double w) { return w > 0 ? a / shared / w : 1.0; };
    out.forward *= ratio(measured.forward, whole.forward);
    out.backward *= ratio(measured.backward, whole.backward);
    out.input *= ratio(measured.input, whole.input);
  } else if (T * C > 1) {
    ModelShape local = m;
    local.bptt = sequence_tokens(m, C);
    Choice whole = c;
    whole.layout.tensor = whole.layout.context = 1;
    whole.experts.parallel = 1;
    const double scale = parts.compute / layer_added_up(local, whole, profile, backend, 1, 1, columns).compute;
    out = {scale * out.forward + parts.cut_comm, scale * out.backward + twice * parts.cut_comm,
           scale * out.input + parts.cut_comm};
  }
  out.forward += parts.expert_comm;
  out.backward += twice * parts.expert_comm;
  out.input += parts.expert_comm;
  return out;
}

// I and W of a stage as the executor runs them (pipeline/executor.cpp):
// I is the gradient of the stage's input alone, `input` when measured (each
// piece's I added up), else half the backward; the first stage returns no
// gradient and skips it. W is autograd's backward to the parameters with
// the graph I kept, and autograd walks again every node between the loss
// (or the received gradient) and a parameter: all the stage's backward but
// its input's own gradient, so W costs the whole backward. (A piece's W
// measured alone walks only its own layer again; a stage of several
// pieces walks the later pieces' input chains as well: on the cpu preset's
// last stage, 2 layers and the decoder at 175 tokens a microbatch, I took
// 12.4 ms and W 19.7 against an unsplit backward of 17.0.)
void split_backward(StageSeconds& out, int stage, double input) {
  out.backward_input = stage == 0 ? 0 : input > 0 ? input : out.backward / 2;
  out.backward_weight = out.backward;
}

}  // namespace

bool uses_pieces(const Profile& profile, const ModelShape& model, const Choice& choice) {
  return profile.pieces_model == pieces_model(model) &&
         profile.has_pieces(memory::to_string(choice.memory.precision), memory::to_string(choice.memory.recompute));
}

int threads_per_rank(const Profile& profile, int world) { return std::max(1, profile.cores / std::max(1, world)); }

StageSeconds stage_seconds(const ModelShape& m, const Choice& c, const Profile& profile, const std::string& backend,
                           int stage, int64_t columns) {
  const int stages = c.layout.pipeline * c.pipeline.stages_per_rank;
  const auto ranges = models::split_layers(m.lm.nlayers, stages);
  const auto [first, end] = ranges.at(static_cast<size_t>(stage));
  const int T = c.layout.tensor, C = c.layout.context;
  const std::string precision = memory::to_string(c.memory.precision);
  const std::string recompute = memory::to_string(c.memory.recompute);
  const int64_t tokens = sequence_tokens(m, C) * columns, d = m.lm.emsize;
  const double layers = double(end - first);
  const LayerParts parts = layer_added_up(m, c, profile, backend, T, C, columns);
  StageSeconds out;

  if (uses_pieces(profile, m, c)) {
    // Measured: the pieces at this rank's tokens, a layer as layer_seconds says.
    const int threads = threads_per_rank(profile, c.layout.world_size());
    const PieceSeconds layer = layer_seconds(m, c, profile, backend, columns, parts);
    out.forward = layers * layer.forward;
    out.backward = layers * layer.backward;
    // I: each piece's measured input gradient (split_backward: W).
    double split_input = layers * layer.input;
    bool measured = layer.input > 0;
    if (stage == 0) {
      const PieceSeconds e = profile.piece_seconds("embedding", precision, "none", threads, double(tokens));
      out.forward += e.forward;
      out.backward += e.backward;
    }
    if (stage == stages - 1) {
      const PieceSeconds e = profile.piece_seconds("decoder", precision, "none", threads, double(tokens));
      out.forward += e.forward;
      out.backward += e.backward;
      split_input += e.input;
      measured = measured && e.input > 0;
    }
    split_backward(out, stage, measured ? split_input : 0);  // not measured: half the backward
    return out;
  }

  // Added up from the parts: the backward twice the forward's products
  // and element-wise work, the recomputed part once more.
  out.forward = layers * (parts.compute + parts.comm);
  out.backward = layers * (2 * parts.compute + parts.comm + parts.again);
  auto elementwise = [&](double bytes) { return bytes / profile.elementwise_bytes_per_second; };
  if (stage == 0) {
    const double e = elementwise(double(4 * tokens * d * kFloat)) + kEmbeddingOps * profile.op_seconds;
    out.forward += e;
    out.backward += 2 * e;
  }
  if (stage == stages - 1) {
    const double logits = 2.0 * double(tokens) * double(d) * double(m.lm.ntokens) /
                          profile.matmul_flops(tokens, d, m.lm.ntokens, precision);
    const double softmax = elementwise(double(3 * tokens * m.lm.ntokens * kFloat)) + kDecoderOps * profile.op_seconds;
    out.forward += logits + softmax;
    out.backward += 2 * logits + 2 * softmax;
  }
  split_backward(out, stage, 0);
  return out;
}

std::string ranks_backend(const Profile& profile) { return profile.device == "cuda" ? "nccl" : "threads"; }

StepPrediction predict_time(const ModelShape& m, const Choice& c, const Profile& profile, const std::string& given) {
  const std::string backend = given.empty() ? ranks_backend(profile) : given;
  const train::Layout& l = c.layout;
  const int P = l.pipeline, v = c.pipeline.stages_per_rank, stages = P * v;
  const int averaging = l.replicas * l.context;
  const int world = l.world_size();
  const int64_t mb = std::min<int64_t>(c.pipeline.microbatches, m.batch / l.replicas);
  // The replica's columns split as tensor_split does (the first columns %
  // m microbatches one column more): each action timed as the mean
  // microbatch (the pieces are linear in the tokens between their sizes);
  // memory peaks on the largest (memory_model.hpp).
  const int64_t replica = replica_columns(m, l.replicas);
  const int64_t small = replica / mb;
  const double larger = double(replica % mb) / double(mb);  // the share one column more
  const int64_t s = sequence_tokens(m, l.context);
  // What crosses a stage boundary, a microbatch on average.
  const int64_t activation_bytes = std::llround(double(s * replica * m.lm.emsize * kFloat) / double(mb));
  const collectives::LinkParams p2p = profile.link(backend, "p2p", 2, world);

  // Each stage's actions, and ZeRO-3's gathers added to them.
  pipeline::ActionCosts costs;
  std::vector<int64_t> stage_psi(static_cast<size_t>(stages));
  for (int st = 0; st < stages; ++st) {
    StageSeconds sec = stage_seconds(m, c, profile, backend, st, small);
    if (larger > 0) {
      const StageSeconds more = stage_seconds(m, c, profile, backend, st, small + 1);
      sec.forward += larger * (more.forward - sec.forward);
      sec.backward += larger * (more.backward - sec.backward);
      sec.backward_input += larger * (more.backward_input - sec.backward_input);
      sec.backward_weight += larger * (more.backward_weight - sec.backward_weight);
    }
    const int64_t psi = stage_parameters(m, st, stages, l.tensor, c.experts.parallel);
    stage_psi[static_cast<size_t>(st)] = psi;
    if (c.data.zero == 3) {
      const double gather = collective_seconds(profile, backend, collectives::Collective::kAllGather, averaging, psi * kFloat, world);
      sec.forward += gather;
      sec.backward += gather;
      sec.backward_weight += gather;  // gathered for the action that computes the weights' gradients
    }
    pipeline::StageCosts sc;
    sc.forward = sec.forward;
    sc.backward = sec.backward;
    // A split backward's halves; a layer that recomputes its parameters
    // computes their gradients in B (memory::recomputes_parameters): W is empty.
    const bool splits = !memory::recomputes_parameters(c.memory.recompute);
    sc.backward_input = splits ? sec.backward_input : sec.backward;
    sc.backward_weight = splits ? sec.backward_weight : 0;
    costs.per_stage.push_back(sc);
  }
  costs.message_s = p2p.alpha_s + double(activation_bytes) * p2p.beta_s_per_byte;
  const pipeline::Schedule schedule = pipeline::make_schedule(c.pipeline.schedule, P, static_cast<int>(mb), v);
  const pipeline::Simulation sim = pipeline::simulate(schedule, costs);

  StepPrediction out;
  out.bubble = sim.bubble;
  out.busy_s = *std::max_element(sim.busy.begin(), sim.busy.end());

  // Averaging and the optimizer, per pipeline rank (its stages' parameters).
  std::vector<double> after(static_cast<size_t>(P), 0.0);
  std::vector<int64_t> sent(static_cast<size_t>(P), 0);
  for (int st = 0; st < stages; ++st) {
    const int r = schedule.rank_of_stage(st);
    const int64_t bytes = stage_psi[static_cast<size_t>(st)] * kFloat;
    double sync = 0;
    if (averaging > 1) {
      const double all_reduce = collective_seconds(profile, backend, collectives::Collective::kAllReduce, averaging, bytes, world);
      const int64_t buckets = std::max<int64_t>(1, ceil_div(bytes, kBucketBytes));
      if (c.data.zero == 0 || c.data.zero == 2) {
        // Buckets launched in the last backward: all but the last hidden behind it.
        const double hidden = std::min(all_reduce * double(buckets - 1) / double(buckets), costs.of(st).backward);
        sync = all_reduce - hidden;
      } else {
        sync = all_reduce;  // ZeRO-1 (and -3's gradients): reduce-scatter and all-gather after the backward
      }
      sent[static_cast<size_t>(r)] += 2 * bytes * (averaging - 1) / averaging;
      if (c.data.zero == 3) sent[static_cast<size_t>(r)] += 2 * mb * bytes * (averaging - 1) / averaging;
    }
    const double optimizer = update_seconds(m, c, profile, st, bytes);
    after[static_cast<size_t>(r)] += sync + optimizer;
  }
  // The gradient norm: one scalar all-reduced over the pipeline and the averaging groups.
  const double clip = 2 * (p2p.alpha_s) * (std::ceil(std::log2(std::max(1, P))) + std::ceil(std::log2(std::max(1, averaging))));
  double worst_after = 0, mean_work = 0;
  for (int r = 0; r < P; ++r) {
    worst_after = std::max(worst_after, after[static_cast<size_t>(r)]);
    mean_work += (sim.busy[static_cast<size_t>(r)] + after[static_cast<size_t>(r)]) / P;
  }
  // On shared cores (shared_cores.hpp): the R x C x T pipelines step
  // together, every rank with work runs at the speed the machine gives
  // that many busy ranks, a rank waiting in the bubble lends its share;
  // what follows the backward runs on every rank at once.
  SharedCosts shared;
  shared.seconds = [&](const pipeline::Action& a) { return costs.seconds(a); };
  shared.message_s = costs.message_s;
  shared.copies = world / P;
  const std::string precision = memory::to_string(c.memory.precision);
  shared.slowdown = [&](double ranks) { return profile.slowdown(ranks, precision); };
  const SharedRun run = run_on_shared_cores(schedule, shared);
  out.pipeline_s = sim.makespan;
  out.after_s = worst_after * profile.slowdown(world, precision) + clip;
  out.critical_s = run.makespan + out.after_s;
  out.packed_s = mean_work * profile.slowdown(world, precision);
  out.step_s = out.critical_s;

  // Bytes on the wire: stage boundaries both ways, every microbatch, on
  // every replica, context and tensor rank; the layers' collectives; the averaging.
  // A rank holds L / P layers; each microbatch crosses each of them once
  // forward and once backward.
  int64_t wire = 2 * (stages - 1) * mb * activation_bytes * l.replicas * l.context * l.tensor;
  const int64_t layer_passes = world * m.lm.nlayers / P * mb;
  if (l.tensor > 1)  // four all-reduces a layer, a ring sending 2 (T-1)/T of the bytes per rank
    wire += layer_passes * 4 * 2 * activation_bytes * (l.tensor - 1) / l.tensor;
  if (l.context > 1)  // K and V blocks, C - 1 steps forward, twice that backward
    wire += layer_passes * 3 * (l.context - 1) * 2 * activation_bytes;
  for (int r = 0; r < P; ++r) wire += sent[static_cast<size_t>(r)] * (world / P);
  out.wire_bytes = wire;

  const int64_t ffn = m.lm.nhid * (m.lm.moe.enabled() ? m.lm.moe.top_k : 1);
  const memory::FlopShape flop_shape{m.lm.emsize, ffn, m.lm.nlayers, m.bptt, m.lm.ntokens};
  out.model_flops = double(memory::model_flops_per_token(flop_shape)) * double(m.batch * m.bptt);
  double peak = 0;
  for (const MatmulPoint& p : profile.matmul)
    if (p.precision == memory::to_string(c.memory.precision)) peak = std::max(peak, p.flops_per_second);
  const double devices = profile.device == "cpu" ? std::min(world, profile.cores) : world;
  out.mfu = peak > 0 ? out.model_flops / out.step_s / (peak * devices) : 0;
  return out;
}

}  // namespace distlab::planner
