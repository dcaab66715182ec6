// Lesson 17: where a training step's memory goes, and the levers that save
// it (the Ultra-Scale Playbook's first chapter).
//
// One process, a stack of the capstone's Transformer layers (post-norm,
// relu, dropout, causal), every byte counted by the allocator meter
// (lib/memory/allocator_meter.hpp) beside its formula:
//
//   1. the anatomy: parameters, gradients and Adam's two moments (4 + 4 + 8
//      bytes a parameter), and the activations the forward keeps for the
//      backward, against batch and sequence (the s^2 term of attention)
//   2. recomputation (lib/memory/recompute.hpp, models/encoder_layer.hpp):
//      none, full, selective (the attention core) and matmuls (all but the
//      products), each's activations, the step's peak and its forward +
//      backward time (every row timed in turn, the median of the rounds),
//      the gradients bit for bit the plain ones
//   3. mixed precision (lib/memory/precision.hpp): the products in bf16
//      with float32 master weights, what the forward keeps then; bytes per
//      parameter beside the Playbook's table; float16's range in the
//      backward (emulated), unscaled and scaled, and the loss scaler
//      (lib/memory/loss_scaler.hpp) backing off on an overflow
//   4. MFU: how much of two peaks each policy's step uses
//      (lib/memory/flops.hpp): the matmul peak measured here, and the
//      hardware's nominal peak (cores x clock x FLOPs a cycle, or a
//      datasheet's number given with --peak-fp32 and --peak-bf16)
//
//   lesson_17_memory
//   lesson_17_memory --seq 128 --batch 4 --step
#include <CLI/CLI.hpp>
#include <ATen/ATen.h>
#include <torch/nn/modules/transformerlayer.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "lesson.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "memory/allocator_meter.hpp"
#include "memory/flops.hpp"
#include "memory/fp16_emulation.hpp"
#include "memory/loss_scaler.hpp"
#include "memory/precision.hpp"
#include "models/encoder_layer.hpp"
#include "models/layer_stack.hpp"
#include "zero/memory.hpp"

using namespace distlab;
using memory::Precision;
using memory::Recompute;
using tensor_parallel::LayerShape;

namespace {

using comm::grouped;

struct Options {
  comm::JobOptions job;
  int64_t layers = 4;
  int64_t seq = 64;
  int64_t batch = 8;
  int64_t hidden = 128;  // the capstone's cpu preset: 128, 4 heads, ffn 256
  int64_t heads = 4;
  int64_t ffn = 256;
  double dropout = 0.2;
  int repeats = 3;  // rounds of timed steps, every row in turn (the median is shown)
  double peak_fp32 = 0, peak_bf16 = 0;  // GFLOP/s, a datasheet's; 0: this CPU's, worked out from /proc/cpuinfo
};

const Recompute kPolicies[] = {Recompute::kNone, Recompute::kFull, Recompute::kSelective, Recompute::kMatmuls};

// Rows whose measurement is not its formula (or gradients not the plain
// ones): the lesson exits 1 after printing them all.
int failures = 0;

std::string same(int64_t measured, int64_t formula) {
  if (measured == formula) return "=";
  ++failures;
  return "DIFFERS";
}

models::LayerStackOptions stack_options(const Options& o) {
  models::LayerStackOptions so;
  so.layers = o.layers, so.hidden = o.hidden, so.heads = o.heads, so.ffn = o.ffn, so.dropout = o.dropout;
  return so;
}

LayerShape shape_of(const Options& o, int64_t seq, int64_t batch) { return {seq, batch, o.hidden, o.heads, o.ffn}; }

at::Tensor input_of(const Options& o, int64_t seq, int64_t batch) {
  return models::layer_stack_input(seq, batch, o.hidden);
}

// One row of the timing table: a policy in a precision, its step timed in
// rounds that take every row in turn (so that a load on the machine falls
// on all of them alike), and the step's peak: the most the allocator held
// above what the parameters took, gradients and the backward's temporaries
// included (what decides whether a step fits).
struct Timed {
  Recompute policy;
  Precision precision;
  double median_ms = 0;
  int64_t peak = 0;
};

std::vector<Timed> time_side_by_side(models::LayerStack& stack, const at::Tensor& x, int repeats) {
  std::vector<Timed> rows;
  for (const Recompute policy : kPolicies) rows.push_back({policy, Precision::kFp32});
  rows.push_back({Recompute::kNone, Precision::kBf16});
  auto& meter = memory::AllocatorMeter::install();
  for (Timed& row : rows) {  // untimed: the allocator's first requests; the peak
    stack.zero_grad();
    const int64_t before = meter.allocated();
    meter.reset_peak();
    stack.step_seconds(x, row.policy, row.precision);
    row.peak = meter.peak() - before;
  }
  std::vector<std::vector<double>> ms(rows.size());
  for (int round = 0; round < repeats; ++round)
    for (size_t i = 0; i < rows.size(); ++i)
      ms[i].push_back(1e3 * stack.step_seconds(x, rows[i].policy, rows[i].precision));
  for (size_t i = 0; i < rows.size(); ++i) {
    std::sort(ms[i].begin(), ms[i].end());
    const size_t n = ms[i].size();
    rows[i].median_ms = n % 2 ? ms[i][n / 2] : (ms[i][n / 2 - 1] + ms[i][n / 2]) / 2;
  }
  return rows;
}

const Timed& timed(const std::vector<Timed>& rows, Recompute policy, Precision precision) {
  for (const Timed& row : rows)
    if (row.policy == policy && row.precision == precision) return row;
  throw std::logic_error("lesson 17: no timing for a row");
}

// The same formulas at the size of the models the field trains: 40 of
// these layers at d 4096, 32 heads, ffn 16384 (N = 8.06e9: an 8B model's
// size, though Llama 3 8B's layers differ: SwiGLU, grouped-query attention),
// one sequence, bf16 products (part 3's formula), no dropout.
void at_scale() {
  const int64_t L = 40, d = 4096, heads = 32, ffn = 16384;
  const int64_t N = L * (4 * d * d + 2 * d * ffn + 9 * d + ffn);  // q, k, v, out, the MLP's two, biases, two norms
  const double copies = 2.0 * double(L) * double(4 * d * d + 2 * d * ffn);  // the weights' bf16 copies
  std::printf("   The same formulas at 8B (%lld layers, d %lld, %lld heads, ffn %lld: N = %.2fe9, 16 N = %.0f GB),\n"
              "   one sequence, bf16 products, no dropout:  kept by the forward    of it the s x s tensors\n",
              static_cast<long long>(L), static_cast<long long>(d), static_cast<long long>(heads),
              static_cast<long long>(ffn), double(N) / 1e9, 16.0 * double(N) / 1e9);
  double rest[2];
  int i = 0;
  for (const int64_t s : {int64_t{4096}, int64_t{32768}}) {
    const LayerShape shape{s, 1, d, heads, ffn};
    const double all = double(L) * double(models::activation_bytes(shape, Recompute::kNone, false, 0,
                                                                   Precision::kBf16));
    rest[i++] = double(L) * double(models::activation_bytes(shape, Recompute::kSelective, false, 0,
                                                            Precision::kBf16));
    std::printf("     %5lldk tokens %32.0f GB %25.0f GB\n", static_cast<long long>(s / 1024), all / 1e9,
                (all - rest[i - 1]) / 1e9);
  }
  std::printf("   The s x s tensors grow as s^2 (64x for 8x the tokens), the rest as s, but for the weights'\n"
              "   bf16 copies (%.0f GB whatever s): without the s x s tensors (selective recomputation, or\n"
              "   FlashAttention, which never keeps them) %.0f GB and %.0f GB.\n\n",
              copies / 1e9, rest[0] / 1e9, rest[1] / 1e9);
}

void anatomy(const Options& o) {
  auto& meter = memory::AllocatorMeter::install();
  const int64_t before_model = meter.allocated();
  models::LayerStack stack(stack_options(o));
  const int64_t params = meter.allocated() - before_model;
  const int64_t n = stack.parameter_count();
  std::printf("1. The anatomy: %lld layers (d %lld, %lld heads, ffn %lld, dropout %.1f), N = %s parameters\n",
              static_cast<long long>(o.layers), static_cast<long long>(o.hidden), static_cast<long long>(o.heads),
              static_cast<long long>(o.ffn), o.dropout, grouped(n).c_str());
  const at::Tensor x = input_of(o, o.seq, o.batch);
  int64_t grads = 0, moments = 0;
  stack.mask_for(o.seq);
  {
    const int64_t before = meter.allocated();
    stack.step_seconds(x, Recompute::kNone, Precision::kFp32);
    grads = meter.allocated() - before;
  }
  torch::optim::Adam adam(stack.parameters(), torch::optim::AdamOptions(1e-3));
  {
    const int64_t before = meter.allocated();
    adam.step();
    moments = meter.allocated() - before;
  }
  std::printf("   %-34s %-24s %12s %12s\n", "what", "formula", "bytes", "measured");
  std::printf("   %-34s %-24s %12s %12s %s\n", "parameters (float32)", "4 N", grouped(4 * n).c_str(),
              grouped(params).c_str(), same(params, 4 * n).c_str());
  std::printf("   %-34s %-24s %12s %12s %s\n", "gradients (float32)", "4 N", grouped(4 * n).c_str(),
              grouped(grads).c_str(), same(grads, 4 * n).c_str());
  std::printf("   %-34s %-24s %12s %12s %s\n", "Adam's two moments (float32)", "8 N", grouped(8 * n).c_str(),
              grouped(moments).c_str(), same(moments, 8 * n).c_str());
  std::printf(
      "   activations the forward keeps for the backward, per layer 10U + 3F + 3A + 4sb bytes x 4\n"
      "   (U = s b d, F = s b ffn, A = heads s^2 b; models/encoder_layer.hpp):\n");
  std::printf("   %-12s %14s %14s %10s %16s\n", "batch x seq", "formula", "measured", "", "of it s^2 (3A)");
  for (const int64_t batch : {o.batch / 2, o.batch})
    for (const int64_t seq : {o.seq / 2, o.seq}) {
      if (batch < 1 || seq < 1) continue;
      const LayerShape shape = shape_of(o, seq, batch);
      const int64_t formula = o.layers * models::activation_bytes(shape, Recompute::kNone, o.dropout > 0, 0);
      const int64_t measured = stack.kept_bytes(input_of(o, seq, batch), Recompute::kNone, Precision::kFp32);
      const int64_t square = o.layers * 4 * 3 * o.heads * seq * seq * batch;
      std::printf("   %4lld x %-5lld %14s %14s %10s %15.0f%%\n", static_cast<long long>(batch),
                  static_cast<long long>(seq), grouped(formula).c_str(), grouped(measured).c_str(),
                  same(measured, formula).c_str(), 100.0 * double(square) / double(formula));
    }
  std::printf(
      "   Doubling the batch doubles the activations; doubling the sequence more than doubles them: the\n"
      "   attention's s x s tensors.");
  // Against what the parameters take with Adam (16 N), at the largest size
  // shown, and the sequence (doubling) at which the activations pass it.
  auto activations_at = [&](int64_t seq) {
    return o.layers * models::activation_bytes(shape_of(o, seq, o.batch), Recompute::kNone, o.dropout > 0, 0);
  };
  const int64_t state = 16 * n, largest = activations_at(o.seq);
  if (largest > state) {
    std::printf(" At %lld x %lld they pass the %s bytes of the parameters, their\n"
                "   gradients and Adam's moments (16 N): activations, not parameters, stop a long sequence.\n",
                static_cast<long long>(o.batch), static_cast<long long>(o.seq), grouped(state).c_str());
  } else {
    int64_t seq = o.seq;
    while (activations_at(seq) <= state && seq < 1024 * o.seq) seq *= 2;
    std::printf(" At %lld x %lld they are %.0f%% of the %s bytes of the parameters,\n"
                "   their gradients and Adam's moments (16 N); at seq %lld (%s bytes) they pass them:\n"
                "   activations, not parameters, stop a long sequence.\n",
                static_cast<long long>(o.batch), static_cast<long long>(o.seq),
                100.0 * double(largest) / double(state), grouped(state).c_str(), static_cast<long long>(seq),
                grouped(activations_at(seq)).c_str());
  }
  at_scale();
}

// With --trace: each policy's bytes as a memory counter sample (the
// visualizer's Memory panel draws one bar per policy, measured beside the
// formula).
void record(const comm::Communicator& comm, const std::string& who, int64_t parameters, int64_t measured,
            int64_t formula) {
  zero::MemoryUse mine, paper;
  mine.parameters = paper.parameters = parameters;
  mine.activations = measured;
  paper.activations = formula;
  zero::record_memory(comm.recorder(), comm.rank(), who, mine, paper);
}

// Returns the timing table of every row (part 2 times them all, side by
// side; parts 3 and 4 read it).
std::vector<Timed> recomputation(const comm::Communicator& comm, const Options& o) {
  models::LayerStack stack(stack_options(o));
  const at::Tensor x = input_of(o, o.seq, o.batch);
  const int64_t generator = memory::generator_state_bytes();
  std::printf("2. Recomputation: %lld layers, batch %lld x seq %lld, the same dropout masks in both runs\n",
              static_cast<long long>(o.layers), static_cast<long long>(o.batch), static_cast<long long>(o.seq));
  const std::vector<Timed> times = time_side_by_side(stack, x, o.repeats);
  std::printf("   %-10s %12s %12s %2s %12s %11s %8s  %s\n", "policy", "kept formula", "measured", "", "step peak",
              "ms, median", "again", "gradients");
  std::vector<at::Tensor> plain;
  const memory::FlopShape flops{o.hidden, o.ffn, o.layers, o.seq, 0};
  for (const Recompute policy : kPolicies) {
    const int64_t formula = stack.kept_formula(x, policy, Precision::kFp32);
    const int64_t measured = stack.kept_bytes(x, policy, Precision::kFp32);
    record(comm, std::string("recompute ") + memory::to_string(policy), 4 * stack.parameter_count(), measured, formula);
    // The gradients of one more step from the same generator state: the plain run's bit for bit?
    at::manual_seed(1717);
    stack.step_seconds(x, policy, Precision::kFp32);
    const std::vector<at::Tensor> grads = stack.gradients();
    std::string verdict = "(the reference)";
    if (plain.empty()) {
      plain = grads;
    } else {
      bool equal = true;
      for (size_t i = 0; i < grads.size(); ++i) equal = equal && at::equal(grads[i], plain[i]);
      verdict = equal ? "bit for bit" : "DIFFER";
      failures += equal ? 0 : 1;
    }
    const double extra =
        double(memory::hardware_flops_per_token(flops, policy)) / double(memory::model_flops_per_token(flops)) - 1;
    const Timed& t = timed(times, policy, Precision::kFp32);
    std::printf("   %-10s %12s %12s %2s %12s %11.1f %7.0f%%  %s\n", memory::to_string(policy), grouped(formula).c_str(),
                grouped(measured).c_str(), same(measured, formula).c_str(), grouped(t.peak).c_str(), t.median_ms,
                100 * extra, verdict.c_str());
  }
  std::printf(
      "   full keeps each layer's output (and the %s-byte generator state to draw the same masks);\n"
      "   selective drops the s x s tensors for two products of s^2 d again; matmuls keeps what the\n"
      "   products made and computes the rest (softmax, masks, norms) again, no product twice.\n"
      "   again: the products computed twice, over the model's. The step's peak adds the gradients\n"
      "   (%s bytes) and the backward's temporaries to what is kept: it decides whether a step\n"
      "   fits. Times: %s, every policy in turn (parts 3 and 4 read them).\n\n",
      grouped(generator).c_str(), grouped(4 * stack.parameter_count()).c_str(),
      o.repeats == 1 ? "1 round" : ("the median of " + std::to_string(o.repeats) + " rounds").c_str());
  return times;
}

// A step's gradients, the layer stack's input's (an activation's gradient:
// it came back through every layer's products) and the weights', with the
// loss multiplied by `scale` before the backward and the gradients divided
// by it after. The loss is this micro-batch's share of a large model's
// batch of kBatchTokens tokens (its mean x its tokens / kBatchTokens), as
// under gradient accumulation and data parallelism: that share is what
// makes the gradients small.
constexpr double kBatchTokens = 1 << 20;
struct StepGradients {
  at::Tensor input, weights;  // flat, float32
};

StepGradients gradients_of(models::LayerStack& stack, const at::Tensor& x_in, Precision precision, double scale) {
  stack.zero_grad();
  at::manual_seed(1717);  // the same dropout masks in every precision
  const at::Tensor x = x_in.clone().requires_grad_(true);
  at::Tensor out;
  {
    memory::ComputeIn guard(precision, x.device().type());
    out = stack.forward(x, Recompute::kNone);
  }
  const double share = double(x.size(0) * x.size(1)) / kBatchTokens;
  (out.to(at::kFloat).pow(2).mean() * (share * scale)).backward();
  std::vector<at::Tensor> flat;
  for (const at::Tensor& p : stack.parameters()) flat.push_back(p.grad().reshape(-1));
  return {x.grad().reshape(-1) / scale, at::cat(flat) / scale};
}

// Of the elements float32's backward gives nonzero, the share `got` has 0.
double flushed(const at::Tensor& got, const at::Tensor& fp32) {
  return 100.0 * double(((got == 0) & (fp32 != 0)).sum().item<int64_t>()) /
         double(std::max<int64_t>(1, (fp32 != 0).sum().item<int64_t>()));
}

// |got - fp32| / |fp32|: inf when not finite.
double off_by(const at::Tensor& got, const at::Tensor& fp32) {
  const double d = (got.to(at::kDouble) - fp32.to(at::kDouble)).norm().item<double>() /
                   fp32.to(at::kDouble).norm().item<double>();
  return std::isfinite(d) ? d : std::numeric_limits<double>::infinity();
}

std::string off_text(double d) {
  if (!std::isfinite(d)) return "inf";
  char text[16];
  std::snprintf(text, sizeof text, "%.1e", d);
  return text;
}

void mixed_precision(const comm::Communicator& comm, const Options& o, const std::vector<Timed>& times) {
  models::LayerStack stack(stack_options(o));
  const at::Tensor x = input_of(o, o.seq, o.batch);
  std::printf("3. Mixed precision: the products in bf16, parameters, gradients and Adam in float32\n");
  const int64_t kept32 = stack.kept_bytes(x, Recompute::kNone, Precision::kFp32);
  const int64_t kept16 = stack.kept_bytes(x, Recompute::kNone, Precision::kBf16);
  const int64_t formula16 = stack.kept_formula(x, Recompute::kNone, Precision::kBf16);
  record(comm, "bf16 products", 4 * stack.parameter_count(), kept16, formula16);
  const Timed& t32 = timed(times, Recompute::kNone, Precision::kFp32);
  const Timed& t16 = timed(times, Recompute::kNone, Precision::kBf16);
  const memory::FlopShape flops{o.hidden, o.ffn, o.layers, o.seq, 0};
  const int64_t copies = 2 * memory::matmul_weights(flops);
  std::printf(
      "   kept by the forward: fp32 %s bytes, bf16 %s (formula %s %s), %.2fx:\n"
      "   the products' tensors halve, the residual sums and norms stay float32, and %s bytes\n"
      "   are the bf16 copies of the weights, kept by their products until the backward\n"
      "   the step's peak: fp32 %s bytes, bf16 %s; its time (part 2's rounds): fp32 %.1f ms,\n"
      "   bf16 %.1f ms, %.2fx float32's on this CPU\n",
      grouped(kept32).c_str(), grouped(kept16).c_str(), grouped(formula16).c_str(), same(kept16, formula16).c_str(),
      double(kept16) / double(kept32), grouped(copies).c_str(), grouped(t32.peak).c_str(), grouped(t16.peak).c_str(),
      t32.median_ms, t16.median_ms, t16.median_ms / t32.median_ms);
  stack.step_seconds(x, Recompute::kNone, Precision::kBf16);
  bool float32 = true;
  for (const at::Tensor& p : stack.parameters())
    float32 = float32 && p.scalar_type() == at::kFloat && p.grad().scalar_type() == at::kFloat;
  std::printf("   after a bf16 step every parameter and gradient is %s\n",
              float32 ? "float32 (the master weights)" : "NOT float32");
  failures += float32 ? 0 : 1;
  std::printf(
      "   bytes per parameter, with Adam (the Playbook's table, and here):\n"
      "     fp32 training                                   4 + 4 + 8            = 16\n"
      "     bf16 params and grads, fp32 master copy        2 + 2 + 4 + 8        = 16\n"
      "     ... with float32 gradient accumulation          2 + 2 + 4 + 8 + 4    = 20\n"
      "     DistLab (autocast): fp32 params and grads       4 + 4 + 8            = 16, and 2 a product\n"
      "                         weight while its bf16 copy lives (forward to backward)\n");
  if (!memory::fp16_emulation_available()) {
    std::printf("   (float16's backward is not shown: this LibTorch leaves no room for its emulation)\n\n");
    return;
  }
  // float16's range in the backward itself (Micikevicius et al.): every
  // product's operands, result and gradients rounded to float16, emulated
  // (memory/fp16_emulation.hpp), the loss unscaled and scaled by 2^16.
  const StepGradients g32 = gradients_of(stack, x, Precision::kFp32, 1);
  const double kScale = 65536;
  const StepGradients plain = gradients_of(stack, x, Precision::kFp16, 1);
  const StepGradients scaled = gradients_of(stack, x, Precision::kFp16, kScale);
  std::printf(
      "   float16 (5 exponent bits, at most 65504, nothing nonzero below 6e-8) in the backward: the loss\n"
      "   as these %lld tokens' share of a 2^20-token batch (a large model's), every product's operands,\n"
      "   result and gradients rounded to float16 (emulated), against float32's gradients:\n",
      static_cast<long long>(x.size(0) * x.size(1)));
  std::printf("   %-33s %27s  %25s\n", "", "0 where fp32's is not", "|fp16 - fp32| / |fp32|");
  std::printf("     %-31s %13s %13s  %12s %12s\n", "", "loss x 1", "loss x 2^16", "loss x 1", "loss x 2^16");
  for (const auto& [name, a, b, ref] :
       {std::make_tuple("the input's (an activation's)", plain.input, scaled.input, g32.input),
        std::make_tuple("the weights'", plain.weights, scaled.weights, g32.weights)})
    std::printf("     %-31s %12.1f%% %12.1f%%  %12s %12s\n", name, flushed(a, ref), flushed(b, ref),
                off_text(off_by(a, ref)).c_str(), off_text(off_by(b, ref)).c_str());
  std::printf("   (the input's gradient is %.1e at most in float32: it came back through every layer)\n",
              g32.input.abs().max().item<double>());
  // The dynamic loss scaler on real float16 backwards. PyTorch's GradScaler
  // starts at 2^16 and grows after 2000 clean steps; the demo starts at the
  // first power of two past 2^16 whose backward overflows (found by
  // doubling) and grows after 2, so that 7 steps show a backoff and a growth.
  memory::LossScalerOptions so;
  const memory::LossScalerOptions defaults;
  const auto overflows = [&](double scale) {
    const StepGradients g = gradients_of(stack, x, Precision::kFp16, scale);
    return memory::LossScaler::any_not_finite({g.input, g.weights});
  };
  so.init_scale = defaults.init_scale;
  while (so.init_scale < std::exp2(60) && !overflows(so.init_scale)) so.init_scale *= 2;
  so.growth_interval = 2;
  memory::LossScaler scaler(so);
  std::printf("   the dynamic loss scaler on float16 backwards of this step: start 2^%.0f (the first power of\n"
              "   two past 2^16 that overflows), x%.0f after %lld clean steps, x%.1f on an inf (PyTorch's\n"
              "   GradScaler: 2^%.0f, x%.0f after %lld, x%.1f):\n",
              std::log2(so.init_scale), so.growth_factor, static_cast<long long>(so.growth_interval),
              so.backoff_factor, std::log2(defaults.init_scale), defaults.growth_factor,
              static_cast<long long>(defaults.growth_interval), defaults.backoff_factor);
  for (int step = 1; step <= 7; ++step) {
    const double scale = scaler.scale();
    const bool taken = scaler.update(overflows(scale));
    std::printf("     step %d: scale 2^%.0f: %s; next 2^%.0f\n", step, std::log2(scale),
                taken ? "finite, step taken" : "inf in fp16, step skipped", std::log2(scaler.scale()));
  }
  std::printf("\n");
}

// The hardware's nominal peak, what a datasheet states: cores x clock x
// FLOPs a core computes a cycle. On this CPU, from /proc/cpuinfo: the cores
// (distinct physical id, core id) the intra-op threads can use, "cpu MHz",
// and the widest vector unit its flags list, two fused multiply-adds
// (FMA, 2 FLOPs each) a cycle on every lane of it, as most server cores
// issue: AVX-512 2 x 16 x 2 = 64 float32 FLOPs a cycle, AVX2 2 x 8 x 2 = 32.
// bf16: avx512_bf16's dot products take two bf16 pairs a float32 lane, twice
// float32's; AMX 1024 a cycle; without either, float32's (bf16 is computed
// in float32). A core with one FMA unit (or AVX-512 on 256-bit units) does
// half: a datasheet's number, given with --peak-fp32 and --peak-bf16, wins.
struct NominalPeak {
  double fp32 = 0, bf16 = 0;  // FLOP/s; 0: not known
  std::string how;            // "2 cores x 2.10 GHz x 64 FLOPs a cycle", or "given"
  std::string units;          // "AVX-512, 2 FMA units of 16 floats, ...": what the FLOPs a cycle assume
  int cores = 0;
  double ghz = 0, fp32_cycle = 0, bf16_cycle = 0;  // worked out from /proc/cpuinfo (0: not)
};

NominalPeak nominal_peak(const Options& o) {
  NominalPeak peak;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string physical = "0", line, flags;
  double mhz = 0;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon), value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    key.erase(key.find_last_not_of(" \t") + 1);
    if (key == "physical id") physical = value;
    if (key == "core id") cores.insert({physical, value});
    if (key == "cpu MHz" && mhz == 0) mhz = std::atof(value.c_str());
    if (key == "flags" && flags.empty()) flags = " " + value + " ";
  }
  auto has = [&](const char* flag) { return flags.find(std::string(" ") + flag + " ") != std::string::npos; };
  const int used = std::min<int>(at::get_num_threads(), std::max<int>(1, static_cast<int>(cores.size())));
  double fp32_cycle = 0, bf16_cycle = 0;
  if (has("avx512f")) fp32_cycle = 64, peak.units = "AVX-512, 2 FMA units of 16 floats";
  else if (has("avx2") && has("fma")) fp32_cycle = 32, peak.units = "AVX2, 2 FMA units of 8 floats";
  if (has("amx_bf16")) bf16_cycle = 1024, peak.units += "; bf16 1024 a cycle (AMX)";
  else if (has("avx512_bf16")) bf16_cycle = 2 * fp32_cycle, peak.units += "; bf16 twice that (avx512_bf16)";
  else bf16_cycle = fp32_cycle, peak.units += "; bf16 computed in float32";
  if (fp32_cycle > 0 && mhz > 0) {
    char how[96];
    std::snprintf(how, sizeof how, "%d core%s x %.2f GHz x %.0f FLOPs a cycle", used, used == 1 ? "" : "s",
                  mhz / 1e3, fp32_cycle);
    peak.how = how;
    peak.cores = used, peak.ghz = mhz / 1e3, peak.fp32_cycle = fp32_cycle, peak.bf16_cycle = bf16_cycle;
    peak.fp32 = used * mhz * 1e6 * fp32_cycle;
    peak.bf16 = used * mhz * 1e6 * bf16_cycle;
  }
  if (o.peak_fp32 > 0 || o.peak_bf16 > 0) {
    peak.how = "given (--peak-fp32, --peak-bf16)";
    peak.cores = 0;
    if (o.peak_fp32 > 0) peak.fp32 = o.peak_fp32 * 1e9;
    if (o.peak_bf16 > 0) peak.bf16 = o.peak_bf16 * 1e9;
  }
  return peak;
}

std::string gflops_text(double flops) {
  if (!(flops > 0)) return "      unknown";
  char text[32];
  std::snprintf(text, sizeof text, flops < 1e11 ? "%6.2f GFLOP/s" : "%6.1f GFLOP/s", flops / 1e9);
  return text;
}

std::string share_text(double share) {
  if (!(share > 0)) return "-";
  char text[16];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * share);
  return text;
}

void mfu(const Options& o, const std::vector<Timed>& times) {
  const double peak32 = memory::matmul_flops_per_second(1024, 5, false, at::kFloat);
  const double peak16 = memory::matmul_flops_per_second(512, 3, false, at::kBFloat16);
  const NominalPeak nominal = nominal_peak(o);
  const memory::FlopShape flops{o.hidden, o.ffn, o.layers, o.seq, 0};
  std::printf("4. MFU: the model's FLOP/s over a peak, two peaks in each precision (%d intra-op threads)\n",
              at::get_num_threads());
  std::printf("   %-49s fp32 %s  bf16 %s\n", "achievable, measured: n x n matmul (n 1024, 512)",
              gflops_text(peak32).c_str(), gflops_text(peak16).c_str());
  std::printf("   %-49s fp32 %s  bf16 %s\n",
              ("hardware: " + (nominal.how.empty() ? std::string("not known here") : nominal.how)).c_str(),
              gflops_text(nominal.fp32).c_str(), gflops_text(nominal.bf16).c_str());
  if (nominal.cores > 0) {
    std::printf("     (%s, 2 FLOPs an FMA;\n"
                "     the clock /proc/cpuinfo reports; --peak-fp32 and --peak-bf16 give a datasheet's)\n",
                nominal.units.c_str());
    // A matmul cannot beat the hardware: past the nominal peak, its inputs are short.
    for (const auto& [name, measured, stated, cycle] :
         {std::make_tuple("fp32", peak32, nominal.fp32, nominal.fp32_cycle),
          std::make_tuple("bf16", peak16, nominal.bf16, nominal.bf16_cycle)})
      if (measured > stated)
        std::printf("     %s's matmul passes its nominal peak (%.0f%%): the cores run above %.2f GHz (%.2f GHz\n"
                    "     at least, at %.0f FLOPs a cycle), or compute more a cycle than assumed\n",
                    name, 100 * measured / stated, nominal.ghz, measured / (nominal.cores * cycle) / 1e9, cycle);
  } else if (nominal.fp32 <= 0) {
    std::printf("     (give the hardware's with --peak-fp32 and --peak-bf16, GFLOP/s)\n");
  }
  std::printf("   a token costs 6N + 12Lsd = %s FLOPs (N = %s: the weights that multiply)\n",
              grouped(memory::model_flops_per_token(flops)).c_str(), grouped(memory::matmul_weights(flops)).c_str());
  std::printf("   %-17s %12s %11s   %-20s %s\n", "", "", "", "over the achievable", "over the hardware's");
  std::printf("   %-10s %-6s %12s %12s %8s %8s   %8s %8s\n", "policy", "", "fwd+bwd ms", "tokens/s", "MFU", "HFU",
              "MFU", "HFU");
  const double tokens = double(o.seq * o.batch);
  for (const Precision precision : {Precision::kFp32, Precision::kBf16})
    for (const Recompute policy : kPolicies) {
      if (precision == Precision::kBf16 && policy != Recompute::kNone) continue;
      const bool fp32 = precision == Precision::kFp32;
      const double seconds = timed(times, policy, precision).median_ms / 1e3;
      const memory::Utilisation u = memory::utilisation(flops, policy, tokens, seconds, fp32 ? peak32 : peak16);
      const memory::Utilisation n =
          memory::utilisation(flops, policy, tokens, seconds, fp32 ? nominal.fp32 : nominal.bf16);
      std::printf("   %-10s %-6s %12.1f %12.0f %8s %8s   %8s %8s\n", memory::to_string(policy),
                  memory::to_string(precision), seconds * 1e3, u.tokens_per_second, share_text(u.mfu).c_str(),
                  share_text(u.hfu).c_str(), share_text(n.mfu).c_str(), share_text(n.hfu).c_str());
    }
  std::printf(
      "   MFU counts the model's FLOPs, HFU what the hardware computed (recomputation included),\n"
      "   each over a peak in the step's precision: the hardware's nominal peak, the one papers' MFU\n"
      "   is over, and beside it the achievable one, the matmul measured here.\n");
}

void run(comm::Communicator& comm, const Options& o, lessons::Parts& parts) {
  // Memory is counted per process: rank 0 measures, the others (processes
  // of their own) wait.
  const bool me = comm.rank() == 0;
  parts.begin(comm, "The anatomy");
  if (me) anatomy(o);
  parts.begin(comm, "Recomputation");
  std::vector<Timed> times;
  if (me) times = recomputation(comm, o);
  parts.begin(comm, "Mixed precision");
  if (me) mixed_precision(comm, o, times);
  parts.begin(comm, "MFU");
  if (me) mfu(o, times);
  std::fflush(stdout);
  if (me && failures > 0)
    throw std::runtime_error(std::to_string(failures) + " measurement(s) differ from their formula (marked above)");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.job.ranks = 1;
  lessons::Parts parts({"The anatomy", "Recomputation", "Mixed precision", "MFU"});
  CLI::App app{
      "Lesson 17: where a step's memory goes (parameters, gradients, optimizer, activations) and the levers: "
      "recomputation, mixed precision and the loss scaler, MFU; every byte measured beside its formula"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--layers", o.layers, "Transformer layers in the stack")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("--seq", o.seq, "sequence length s")->check(CLI::Range(2, 65536))->capture_default_str();
  app.add_option("--batch", o.batch, "batch b")->check(CLI::Range(2, 65536))->capture_default_str();
  app.add_option("--hidden", o.hidden, "model width d (the capstone's cpu preset: 128)")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--heads", o.heads, "attention heads (must divide --hidden)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--ffn", o.ffn, "feed-forward width")->check(CLI::Range(1, 262144))->capture_default_str();
  app.add_option("--dropout", o.dropout, "dropout (the layers run in training mode)")
      ->check(CLI::Range(0.0, 0.99))
      ->capture_default_str();
  app.add_option("--repeats", o.repeats, "rounds of timed steps, every policy in turn (the median is shown)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--peak-fp32", o.peak_fp32,
                 "the hardware's nominal float32 peak in GFLOP/s (a datasheet's; 0: this CPU's, cores x clock x "
                 "FLOPs a cycle)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  app.add_option("--peak-bf16", o.peak_bf16, "the same in bf16")->check(CLI::Range(0.0, 1e9))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (o.job.backend == "threads" && o.job.ranks > 1) {
    std::fprintf(stderr,
                 "lesson_17_memory: --ranks %d: thread ranks share one allocator, whose counts this lesson "
                 "reads; run one (the default), or processes under distlab-run (rank 0 measures)\n",
                 o.job.ranks);
    return 1;
  }
  if (o.hidden % o.heads != 0) {
    std::fprintf(stderr, "lesson_17_memory: --heads %lld does not divide --hidden %lld\n",
                 static_cast<long long>(o.heads), static_cast<long long>(o.hidden));
    return 1;
  }
  return lessons::run_lesson("lesson_17_memory", o.job, [&](comm::Communicator& comm) { run(comm, o, parts); });
}
