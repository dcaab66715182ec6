// Lesson 13: tensor and sequence parallelism (Megatron-LM).
//
// ZeRO (lesson 12) shards what a rank stores between uses; each layer is
// still computed whole, on every rank. Tensor parallelism (Shoeybi et al.,
// 2019) cuts the layer's matrices: a column-parallel linear keeps rows of W
// (a slice of the output features), the row-parallel linear after it keeps
// the matching columns and computes a partial sum. Two conjugate operators
// join them to the rest of the model:
//   f  forward identity, backward all-reduce (into the region)
//   g  forward all-reduce, backward identity (out of the region)
// Attention splits the same way by heads. Sequence parallelism (Korthikanti
// et al., 2022) splits what lies between the regions (LayerNorms, dropouts,
// residuals) along the sequence: g becomes a reduce-scatter and f an
// all-gather, the same bytes, and those activations shrink by t too.
//
//   1. the two linears by hand on 2 ranks: what each holds, what crosses
//      the wire, the MLP against the unsplit one
//   2. a whole Transformer layer (the capstone's shape) cut over t ranks,
//      equal to torch's unsplit layer: output and every gradient
//   3. for t = 1, 2, 4: bytes per layer per step from the trace beside the
//      count, activations per rank measured beside the formulas
//
//   lesson_13_tensor_parallel --backend threads --ranks 4
//   distlab-run --nproc-per-node 2 -- lesson_13_tensor_parallel --backend gloo
#include <CLI/CLI.hpp>
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/transformerlayer.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "lesson.hpp"
#include "over_ranks.hpp"
#include "replicas.hpp"
#include "wire.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "tensor_parallel/layer.hpp"
#include "tensor_parallel/memory.hpp"
#include "trace/clock.hpp"
#include "trace/recorder.hpp"

using namespace distlab;
using tensor_parallel::ActivationBytes;
using tensor_parallel::LayerShape;
using lessons::Wire;

namespace {

using comm::grouped;

struct Options {
  comm::JobOptions job;
  int64_t seq = 64;      // S: split among the ranks under sequence parallelism
  int64_t batch = 8;     // N
  int64_t hidden = 128;  // E (the capstone's cpu preset: 128, 4 heads, ffn 256)
  int64_t heads = 4;
  int64_t ffn = 256;
  double dropout = 0.2;  // part 3's layer (the capstone's); parts 1-2 run 0 to compare values
  int threads = 0;       // intra-op threads per rank; 0 = cores / ranks on this machine
};

constexpr double kSame = 1e-5;  // the largest difference parts 1-2 accept from the unsplit layer

LayerShape shape_of(const Options& o) { return {o.seq, o.batch, o.hidden, o.heads, o.ffn}; }

std::string shape_text(const at::Tensor& t) {
  std::string text = "(";
  for (int64_t d = 0; d < t.dim(); ++d) text += (d ? ", " : "") + std::to_string(t.size(d));
  return text + ")";
}

double largest_difference(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return std::numeric_limits<double>::infinity();
  return (a.detach().cpu().to(at::kDouble) - b.detach().cpu().to(at::kDouble)).abs().max().item<double>();
}

// The same numbers on every rank and every run: a generator of our own
// (thread ranks share the global one).
at::Tensor seeded_randn(at::IntArrayRef sizes, uint64_t seed, const comm::Communicator& comm) {
  return at::randn(sizes, at::detail::createCPUGenerator(seed)).to(comm.device());
}

// The unsplit layer every rank cuts its part from: the capstone's
// TransformerEncoderLayer (post-norm, relu), weights from a fixed seed; the
// norms' weights near 1 so that they pass the signal on.
torch::nn::TransformerEncoderLayer unsplit_layer(const Options& o, double dropout, const comm::Communicator& comm) {
  torch::nn::TransformerEncoderLayer layer(
      torch::nn::TransformerEncoderLayerOptions(o.hidden, o.heads).dim_feedforward(o.ffn).dropout(dropout));
  lessons::fill_from_seed(*layer, 13);
  {
    at::NoGradGuard no_grad;
    at::Generator g = at::detail::createCPUGenerator(14);
    for (auto* norm : {&layer->norm1, &layer->norm2}) {
      (*norm)->weight.copy_(1.0 + 0.1 * at::randn((*norm)->weight.sizes(), g));
      (*norm)->bias.copy_(0.1 * at::randn((*norm)->bias.sizes(), g));
    }
  }
  layer->to(comm.device());
  return layer;
}

at::Tensor causal_mask(int64_t s, const comm::Communicator& comm) {
  return at::triu(at::full({s, s}, -std::numeric_limits<float>::infinity()), 1).to(comm.device());
}

// The tensor sizes the lesson cuts the layer over: 1, 2, 4, ... up to the
// world's size, each dividing the world (groups of t ranks side by side);
// rank 0 says which powers of two the world leaves out. Each size must also
// divide the heads, the feed-forward width and the sequence: a size those
// leave out is refused, naming the flag, rather than skipped (the lesson
// would pass with a part of what was asked never run).
std::vector<int> tensor_sizes(const comm::Communicator& world, const Options& o) {
  std::vector<int> sizes;
  std::string refused;
  for (int t = 1; t <= world.size(); t *= 2) {
    if (world.size() % t != 0) {
      if (world.rank() == 0)
        std::printf("  (t=%d left out: %d ranks do not make groups of %d)\n", t, world.size(), t);
      continue;
    }
    std::string why;
    if (o.heads % t != 0) why = "--heads " + std::to_string(o.heads);
    else if (o.ffn % t != 0) why = "--ffn " + std::to_string(o.ffn);
    else if (o.seq % t != 0) why = "--seq " + std::to_string(o.seq);
    if (!why.empty()) refused += (refused.empty() ? "" : "; ") + why + " does not split among t=" + std::to_string(t);
    sizes.push_back(t);
  }
  std::string listed;
  for (int t : sizes) listed += (listed.empty() ? "" : ", ") + std::to_string(t);
  if (!refused.empty())
    throw comm::SetupError("lesson 13 cuts the layer over t = " + listed + " on " +
                           comm::counted(world.size(), "rank") + ", but " + refused +
                           ": give sizes every t divides, or fewer ranks");
  return sizes;
}

// Groups of t consecutive ranks: rank 0's group is ranks 0..t-1.
std::unique_ptr<comm::Communicator> groups_of(comm::Communicator& world, int t) {
  return world.split(/*color=*/world.rank() / t, /*key=*/world.rank(), "tensor" + std::to_string(t));
}

// ---- part 1 ----

// The MLP linear2(relu(linear1(x))) cut over a pair of ranks by hand.
bool two_linears(comm::Communicator& world, const Options& o, Wire& wire) {
  auto pair = groups_of(world, 2);
  torch::nn::Linear full1(o.hidden, o.ffn), full2(o.ffn, o.hidden);
  lessons::fill_from_seed(*full1, 1);
  lessons::fill_from_seed(*full2, 2);
  full1->to(world.device());
  full2->to(world.device());
  tensor_parallel::ColumnParallelLinear column(*pair, full1->weight, full1->bias);
  tensor_parallel::RowParallelLinear row(*pair, full2->weight, full2->bias);

  const at::Tensor x = seeded_randn({o.seq, o.batch, o.hidden}, 3, world);
  const at::Tensor probe = seeded_randn({o.seq, o.batch, o.hidden}, 4, world);
  const double positions = static_cast<double>(o.seq * o.batch);
  at::Tensor x_ref = x.clone().requires_grad_(true);
  const at::Tensor z_ref = full2(at::relu(full1(x_ref)));
  ((z_ref * probe).sum() / positions).backward();  // the loss: a mean over the S x N positions

  // Split, each step in a window of the trace of its own.
  at::Tensor x_mine = x.clone().requires_grad_(true);
  world.barrier();
  const int64_t t0 = trace::now_us();
  const at::Tensor hidden = column(x_mine);  // f, then my rows of W1
  const int64_t t1 = trace::now_us();
  const at::Tensor z = row(at::relu(hidden));  // my columns of W2, then g
  const int64_t t2 = trace::now_us();
  ((z * probe).sum() / positions).backward();  // g's backward, then f's
  const int64_t t3 = trace::now_us();
  world.barrier();

  // What each rank of the pair holds: its sizes, and whether they are the
  // unsplit weights' rows (W1) and columns (W2) that its place calls for.
  const int64_t rows = column->weight.size(0), cols = row->weight.size(1);
  const bool my_slices = at::equal(column->weight, full1->weight.narrow(0, pair->rank() * rows, rows)) &&
                         at::equal(column->bias, full1->bias.narrow(0, pair->rank() * rows, rows)) &&
                         at::equal(row->weight, full2->weight.narrow(1, pair->rank() * cols, cols)) &&
                         at::equal(row->bias, full2->bias);
  const std::vector<double> held_rows = lessons::one_per_rank(*pair, static_cast<double>(rows));
  const std::vector<double> held_cols = lessons::one_per_rank(*pair, static_cast<double>(cols));
  const std::vector<double> held_right = lessons::one_per_rank(*pair, my_slices ? 1 : 0);

  const double out = largest_difference(z, z_ref);
  const double in_grad = largest_difference(x_mine.grad(), x_ref.grad());
  const int64_t first_row = pair->rank() * rows, first_col = pair->rank() * cols;
  const double w_grad =
      std::max({largest_difference(column->weight.grad(), full1->weight.grad().narrow(0, first_row, rows)),
                largest_difference(column->bias.grad(), full1->bias.grad().narrow(0, first_row, rows)),
                largest_difference(row->weight.grad(), full2->weight.grad().narrow(1, first_col, cols)),
                largest_difference(row->bias.grad(), full2->bias.grad())});
  const double worst_out = lessons::max_over_ranks(world, out);
  const double worst_in = lessons::max_over_ranks(world, in_grad);
  const double worst_w = lessons::max_over_ranks(world, w_grad);
  const int64_t f_forward = wire.sent(t0, t1), g_forward = wire.sent(t1, t2), backward = wire.sent(t2, t3);
  wire.clear();

  const bool ok = worst_out < kSame && worst_in < kSame && worst_w < kSame &&
                  std::all_of(held_right.begin(), held_right.end(), [](double right) { return right > 0; });
  if (world.rank() != 0) return ok;
  const int64_t elements = o.seq * o.batch * o.hidden;
  std::printf("\n1. The two linears by hand: the MLP %lld -> %lld -> %lld (relu) on 2 tensor ranks\n",
              static_cast<long long>(o.hidden), static_cast<long long>(o.ffn), static_cast<long long>(o.hidden));
  std::printf("  unsplit: linear1.weight %s, linear2.weight %s; x %s\n", shape_text(full1->weight).c_str(),
              shape_text(full2->weight).c_str(), shape_text(x).c_str());
  bool all_right = true;
  for (int r = 0; r < pair->size(); ++r) {
    const auto n = static_cast<long long>(held_rows[r]), c = static_cast<long long>(held_cols[r]);
    const auto e = static_cast<long long>(o.hidden);
    const std::string rows_held = "linear1 rows " + std::to_string(r * n) + "-" + std::to_string((r + 1) * n - 1) + ":";
    const std::string cols_held =
        "linear2 columns " + std::to_string(r * c) + "-" + std::to_string((r + 1) * c - 1) + ":";
    std::printf("  rank %d: %-24s weight (%lld, %lld), bias (%lld)\n", r, rows_held.c_str(), n, e, n);
    std::printf("          %-24s weight (%lld, %lld), bias (%lld) whole\n", cols_held.c_str(), e, c, e);
    all_right = all_right && held_right[r] > 0;
  }
  std::printf("  checked: each is exactly those rows and columns of the unsplit weights: %s\n",
              all_right ? "yes" : "NO");
  std::printf("  what rank 0 sent, read from the trace:\n");
  std::printf("    forward   f = identity, into linear1               %10s bytes\n", grouped(f_forward).c_str());
  std::printf("              g = all-reduce of linear2's partial sums %10s bytes\n", grouped(g_forward).c_str());
  std::printf("    backward  g = identity, f = all-reduce of dL/dx    %10s bytes\n", grouped(backward).c_str());
  std::printf("  a ring all-reduce of %s floats sends 2 (t-1)/t x %s = %s bytes\n", shape_text(z).c_str(),
              grouped(elements * 4).c_str(), grouped(elements * 4).c_str());
  std::printf("  against the unsplit MLP, the largest differences (both ranks): output %.3g,\n"
              "  dL/dx %.3g, weight gradients %.3g   %s\n",
              worst_out, worst_in, worst_w, ok ? "OK" : "DIFFERENT");
  std::printf("  loss = sum(z * probe) / (S N), a mean over the positions; the unsplit values are up to\n"
              "  |z| %.3g, |dL/dx| %.3g, |dL/dW| %.3g\n",
              z_ref.abs().max().item<double>(), x_ref.grad().abs().max().item<double>(),
              std::max(full1->weight.grad().abs().max().item<double>(),
                       full2->weight.grad().abs().max().item<double>()));
  std::printf("  Look: relu needs no communication: each rank holds whole features of the hidden layer.\n");
  return ok;
}

// ---- part 2 ----

struct LayerCheck {
  int t;
  bool sp;
  double output = 0, input_grad = 0, param_grads = 0;  // the largest over every rank
  int64_t parameters = 0;                              // rank 0's
  double largest_output = 0, largest_input_grad = 0, largest_param_grad = 0;  // the unsplit layer's values
};

LayerCheck check_layer(comm::Communicator& world, comm::Communicator& group, const Options& o, bool sp) {
  torch::nn::TransformerEncoderLayer full = unsplit_layer(o, 0.0, world);
  const at::Tensor mask = causal_mask(o.seq, world);
  const at::Tensor x = seeded_randn({o.seq, o.batch, o.hidden}, 5, world);
  const at::Tensor probe = seeded_randn({o.seq, o.batch, o.hidden}, 6, world);
  const double positions = static_cast<double>(o.seq * o.batch);
  at::Tensor x_ref = x.clone().requires_grad_(true);
  const at::Tensor y_ref = full(x_ref, mask);
  ((y_ref * probe).sum() / positions).backward();

  const tensor_parallel::ParallelOptions options{sp};
  tensor_parallel::ParallelEncoderLayer layer(group, full, options);
  auto mine = [&](const at::Tensor& whole) { return sp ? tensor_parallel::my_sequence_rows(group, whole) : whole; };
  at::Tensor x_mine = mine(x).clone().requires_grad_(true);
  const at::Tensor y = layer(x_mine, mask);
  ((y * mine(probe)).sum() / positions).backward();  // under sequence parallelism, my rows' share of the loss
  tensor_parallel::sync_sequence_parallel_grads(group, layer->replicated_parameters(), options);

  LayerCheck c{group.size(), sp};
  c.largest_output = y_ref.abs().max().item<double>();
  c.largest_input_grad = x_ref.grad().abs().max().item<double>();
  for (const auto& p : full->parameters())
    c.largest_param_grad = std::max(c.largest_param_grad, p.grad().abs().max().item<double>());
  double grads = 0;
  const auto whole = layer->whole_state(/*gradients=*/true);
  for (const auto& item : full->named_parameters())
    grads = std::max(grads, whole.count(item.key()) ? largest_difference(whole.at(item.key()), item.value().grad())
                                                    : std::numeric_limits<double>::infinity());
  for (const auto& p : layer->parameters()) c.parameters += p.numel();
  c.output = lessons::max_over_ranks(world, largest_difference(y, mine(y_ref)));
  c.input_grad = lessons::max_over_ranks(world, largest_difference(x_mine.grad(), mine(x_ref.grad())));
  c.param_grads = lessons::max_over_ranks(world, grads);
  return c;
}

bool whole_layer(comm::Communicator& world, const Options& o, const std::vector<int>& sizes) {
  std::vector<LayerCheck> checks;
  for (int t : sizes) {
    auto group = groups_of(world, t);
    checks.push_back(check_layer(world, *group, o, false));
    if (t > 1) checks.push_back(check_layer(world, *group, o, true));
  }
  bool ok = true;
  for (const LayerCheck& c : checks) ok = ok && c.output < kSame && c.input_grad < kSame && c.param_grads < kSame;
  if (world.rank() != 0) return ok;
  int64_t unsplit = 0;
  for (const auto& p : unsplit_layer(o, 0.0, world)->parameters()) unsplit += p.numel();
  std::printf("\n2. A tensor-parallel Transformer layer against torch's unsplit one\n"
              "  the capstone's shape: E=%lld, %lld heads, ffn %lld, relu, post-norm, causal mask\n"
              "  dropout 0; x (%lld, %lld, %lld); loss = sum(y * probe) / (S N)\n",
              static_cast<long long>(o.hidden), static_cast<long long>(o.heads), static_cast<long long>(o.ffn),
              static_cast<long long>(o.seq), static_cast<long long>(o.batch), static_cast<long long>(o.hidden));
  std::printf("  %2s  %-11s %10s %10s %13s %17s\n", "t", "region", "output", "dL/dx", "param grads",
              "parameters/rank");
  for (const LayerCheck& c : checks)
    std::printf("  %2d  %-11s %10.3g %10.3g %13.3g %17s\n", c.t, c.t == 1 ? "unsplit" : c.sp ? "tensor+seq" : "tensor",
                c.output, c.input_grad, c.param_grads, grouped(c.parameters).c_str());
  std::printf("  the largest differences over every rank   %s\n", ok ? "OK" : "DIFFERENT");
  std::printf("  param grads: all %zu gradients of the unsplit layer (%s parameters), gathered\n"
              "  back by whole_state(true); the unsplit values are up to |y| %.3g, |dL/dx| %.3g,\n"
              "  |param grad| %.3g\n",
              unsplit_layer(o, 0.0, world)->named_parameters().size(), grouped(unsplit).c_str(),
              checks.front().largest_output, checks.front().largest_input_grad, checks.front().largest_param_grad);
  std::printf("  Look: two all-reduces forward (attention's g, the MLP's g), two backward (their f).\n"
              "  Norms and row-parallel biases stay whole on every rank: parameters/rank is not 1/t.\n");
  return ok;
}

// ---- part 3 ----

struct StepRow {
  int t;
  bool sp;
  int64_t sent = 0, sync = 0;  // rank 0's bytes: forward + backward; the replicated gradients' all-reduce
  int64_t measured = -1;       // rank 0's activations, or -1 (not measured: GPU tensors)
  bool every_rank_same = true; // a process per rank: every rank measured rank 0's bytes
};

StepRow one_step(comm::Communicator& world, comm::Communicator& group, const Options& o, bool sp, Wire& wire) {
  const torch::nn::TransformerEncoderLayer full = unsplit_layer(o, o.dropout, world);
  const tensor_parallel::ParallelOptions options{sp};
  tensor_parallel::ParallelEncoderLayer layer(group, full, options);  // training mode: its dropouts run
  const at::Tensor mask = causal_mask(o.seq, world);
  auto mine = [&](const at::Tensor& whole) {
    return (sp ? tensor_parallel::my_sequence_rows(group, whole) : whole).clone();
  };
  const at::Tensor x = mine(seeded_randn({o.seq, o.batch, o.hidden}, 7, world)).requires_grad_(true);
  const at::Tensor probe = mine(seeded_randn({o.seq, o.batch, o.hidden}, 8, world));

  StepRow row{group.size(), sp};
  if (world.device().is_cpu()) {
    row.measured = tensor_parallel::measure_forward_bytes(world, [&] { return layer(x, mask); });
    if (world.backend() != "threads") {
      const double m = static_cast<double>(row.measured);
      row.every_rank_same = lessons::max_over_ranks(world, m) == -lessons::max_over_ranks(world, -m);
    }
  }

  world.barrier();
  const int64_t t0 = trace::now_us();
  ((layer(x, mask) * probe).sum() / static_cast<double>(o.seq * o.batch)).backward();
  const int64_t t1 = trace::now_us();
  tensor_parallel::sync_sequence_parallel_grads(group, layer->replicated_parameters(), options);
  const int64_t t2 = trace::now_us();
  world.barrier();
  row.sent = wire.sent(t0, t1);
  row.sync = wire.sent(t1, t2);
  wire.clear();
  return row;
}

void sequence_parallelism(comm::Communicator& world, const Options& o, const std::vector<int>& sizes, Wire& wire) {
  std::vector<StepRow> rows;
  for (int t : sizes) {
    auto group = groups_of(world, t);
    rows.push_back(one_step(world, *group, o, false, wire));
    if (t > 1) rows.push_back(one_step(world, *group, o, true, wire));
  }
  if (world.rank() != 0) return;
  const LayerShape shape = shape_of(o);
  const int64_t u = o.seq * o.batch * o.hidden;
  std::printf("\n3. Sequence parallelism: one layer, one step, rank 0's bytes\n"
              "  part 2's layer, training, dropout %g; s=%lld b=%lld h=%lld a=%lld: sbh = %s, 5as/h = %g\n",
              o.dropout, static_cast<long long>(o.seq), static_cast<long long>(o.batch),
              static_cast<long long>(o.hidden), static_cast<long long>(o.heads), grouped(u).c_str(),
              5.0 * static_cast<double>(o.heads * o.seq) / static_cast<double>(o.hidden));
  std::printf("  %16s %-24s %s\n", "", "sent per step (bytes)", "activations per rank (bytes)");
  std::printf("  %2s  %-10s %11s %11s  %11s %11s %11s\n", "t", "region", "trace", "counted", "measured", "fp32 form",
              "paper");
  for (const StepRow& r : rows) {
    const int64_t counted = 4 * 2 * (r.t - 1) * u * 4 / r.t;  // 4 all-reduces of sbh floats, 2 (t-1)/t each
    const bool dropout = o.dropout > 0;
    const ActivationBytes form = tensor_parallel::distlab_activation_bytes(shape, r.t, r.sp, dropout);
    std::printf("  %2d  %-10s %11s %11s  %11s %11s %11s\n", r.t, r.t == 1 ? "unsplit" : r.sp ? "tensor+seq" : "tensor",
                grouped(r.sent).c_str(), grouped(counted).c_str(), r.measured < 0 ? "-" : grouped(r.measured).c_str(),
                grouped(form.total()).c_str(),
                grouped(tensor_parallel::paper_activation_bytes(shape, r.t, r.sp)).c_str());
  }
  std::printf("  counted: 4 all-reduces of sbh floats per layer per step (2 forward, 2 backward), each\n"
              "  sending 2 (t-1)/t x sbh x 4 bytes on the ring; with sequence parallelism 4 all-gathers\n"
              "  and 4 reduce-scatters, (t-1)/t x sbh x 4 bytes each: the same.\n");
  std::string sync;
  for (const StepRow& r : rows)
    if (r.sp) sync += (sync.empty() ? "" : ", ") + ("t=" + std::to_string(r.t) + " " + grouped(r.sync));
  if (!sync.empty())
    std::printf("  + sequence parallelism all-reduces the norms' and biases' gradients (6 x %lld floats)\n"
                "    after backward: %s bytes (trace)\n",
                static_cast<long long>(o.hidden), sync.c_str());
  bool same = true;
  for (const StepRow& r : rows) same = same && r.every_rank_same;
  if (world.device().is_cpu() && world.backend() == "threads")
    std::printf("  measured: the CPU allocator's bytes after the forward minus before, output held;\n"
                "  thread ranks share it: rank 0's forward ran while the others kept nothing\n");
  else if (world.device().is_cpu())
    std::printf("  measured: the CPU allocator's bytes after the forward minus before, output held;\n"
                "  each process its own: every rank measured what rank 0 did: %s\n", same ? "yes" : "NO");
  else
    std::printf("  measured: - (the meter counts the CPU allocator; these tensors are on %s)\n",
                world.device().str().c_str());
  std::printf("  fp32 form: what ParallelEncoderLayer keeps, float32, masks as float noise (memory.hpp)\n"
              "  paper: Korthikanti et al. 2022: 2-byte activations, 1-byte masks, ffn 4h\n");
  std::printf("  Look: sequence parallelism sends the same bytes (an all-reduce is a reduce-scatter and\n"
              "  an all-gather) and divides the activations outside the region by t. DistLab keeps\n"
              "  the two gathered inputs whole (2 sbh floats); Megatron-LM re-gathers them in backward.\n");
}

void run(comm::Communicator& world, const Options& o, lessons::Parts& parts) {
  if (world.size() < 2) throw comm::SetupError("lesson 13 needs at least 2 ranks to split over (--ranks 4)");
  const int threads = lessons::share_cores(o.threads);
  if (world.rank() == 0) {
    std::printf("Lesson 13: tensor and sequence parallelism  (%s backend, %s, %d thread(s) each)\n",
                world.backend().c_str(), comm::counted(world.size(), "rank").c_str(), threads);
  }
  Wire wire(world);
  const std::vector<int> sizes = tensor_sizes(world, o);
  bool ok = true;

  parts.begin(world, "The two linears by hand");
  ok = two_linears(world, o, wire) && ok;

  parts.begin(world, "A tensor-parallel Transformer layer");
  ok = whole_layer(world, o, sizes) && ok;

  parts.begin(world, "Sequence parallelism");
  sequence_parallelism(world, o, sizes, wire);
  if (world.rank() == 0)
    std::printf("\nNext: --backend gloo under distlab-run --nproc-per-node 4 (each rank's own allocator),\n"
                "--seq 256 (the s x s attention term grows), --dropout 0 (no masks).\n");
  // Every rank fails together when a check did not hold.
  if (lessons::max_over_ranks(world, ok ? 0.0 : 1.0) > 0) throw std::runtime_error("a check did not hold (see above)");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  lessons::Parts parts({"The two linears by hand", "A tensor-parallel Transformer layer", "Sequence parallelism"});
  CLI::App app{"Lesson 13: tensor and sequence parallelism: the f/g pair, a Transformer layer cut over t ranks equal "
               "to the unsplit one, bytes per step and activations per rank beside the formulas"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--seq", o.seq, "sequence length S (split among the tensor ranks under sequence parallelism)")
      ->check(CLI::Range(1, 65536))->capture_default_str();
  app.add_option("--batch", o.batch, "batch N (columns of the (S, N, E) input)")->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--hidden", o.hidden, "model width E (the capstone's cpu preset: 128)")->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--heads", o.heads, "attention heads (split among the tensor ranks; must divide --hidden)")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--ffn", o.ffn, "feed-forward width (split among the tensor ranks)")->check(CLI::Range(1, 262144))
      ->capture_default_str();
  app.add_option("--dropout", o.dropout, "dropout of part 3's layer, run in training mode (parts 1-2 run 0)")
      ->check(CLI::Range(0.0, 0.99))->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads per rank (0: cores / ranks on this machine)")
      ->check(CLI::Range(0, 256))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.hidden % o.heads != 0) {
    std::fprintf(stderr, "lesson_13_tensor_parallel: --heads %lld does not divide --hidden %lld\n",
                 static_cast<long long>(o.heads), static_cast<long long>(o.hidden));
    return 1;
  }
  return lessons::run_lesson("lesson_13_tensor_parallel", o.job,
                             [&](comm::Communicator& comm) { run(comm, o, parts); });
}
