// distlab-bench memory: the memory levers side by side in one run, on one
// process.
//
//   distlab-bench memory
//   distlab-bench memory --seq 128 --batch 4 --precisions fp32
//
// A stack of the capstone's Transformer layers (models/layer_stack.hpp),
// forward and backward, per recomputation policy (none, full, selective,
// matmuls) and precision (fp32, bf16): rank 0 prints
//
//   kept MB     what the forward keeps for the backward, measured by the
//               allocator meter (bytes / 10^6)
//   formula MB  its derivation (models/encoder_layer.hpp; fp32 only)
//   step ms     the median of -n steps after -w, and the range
//   tokens/s    seq x batch over the median step
//   MFU, HFU    model and hardware FLOP/s (memory/flops.hpp) over the matmul
//               peak measured in the step's precision
//   vs none     the step's time and the kept bytes against the same
//               precision's plain run
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench_registry.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "memory/flops.hpp"
#include "models/encoder_layer.hpp"
#include "models/layer_stack.hpp"
#include "ranks.hpp"

namespace distlab::bench {
namespace {

struct MemoryBenchOptions {
  comm::JobOptions job;
  models::LayerStackOptions stack;
  int64_t seq = 64, batch = 8;
  std::vector<std::string> precisions = {"fp32", "bf16"};
  int iters = 3, warmup = 1;
};

void run_rank(comm::Communicator& world, const MemoryBenchOptions& o) {
  if (world.rank() != 0) return;  // memory is counted per process: one measures
  using memory::Precision;
  using memory::Recompute;
  models::LayerStack stack(o.stack);
  const at::Tensor x = models::layer_stack_input(o.seq, o.batch, o.stack.hidden);
  const memory::FlopShape flops{o.stack.hidden, o.stack.ffn, o.stack.layers, o.seq, 0};
  const tensor_parallel::LayerShape shape{o.seq, o.batch, o.stack.hidden, o.stack.heads, o.stack.ffn};
  const int64_t generator = memory::generator_state_bytes();
  std::printf(
      "memory levers: %lld layers (d %lld, %lld heads, ffn %lld, dropout %.1f), batch %lld x seq %lld, "
      "%d intra-op thread(s), median of %d after %d\n",
      static_cast<long long>(o.stack.layers), static_cast<long long>(o.stack.hidden),
      static_cast<long long>(o.stack.heads), static_cast<long long>(o.stack.ffn), o.stack.dropout,
      static_cast<long long>(o.batch), static_cast<long long>(o.seq), at::get_num_threads(), o.iters, o.warmup);
  std::printf("%-10s %-5s %9s %11s %9s %15s %9s %7s %7s %9s %9s\n", "policy", "prec", "kept MB", "formula MB",
              "step ms", "range", "tokens/s", "MFU", "HFU", "time/none", "kept/none");
  for (const std::string& name : o.precisions) {
    const Precision precision = memory::precision_from(name);
    const double peak = memory::matmul_flops_per_second(precision == Precision::kFp32 ? 1024 : 512, 3, false,
                                                        memory::compute_dtype(precision));
    double none_ms = 0, none_kept = 0;
    for (const Recompute policy : {Recompute::kNone, Recompute::kFull, Recompute::kSelective, Recompute::kMatmuls}) {
      const int64_t kept = stack.kept_bytes(x, policy, precision);
      for (int i = 0; i < o.warmup; ++i) stack.step_seconds(x, policy, precision);
      std::vector<double> ms;
      for (int i = 0; i < o.iters; ++i) ms.push_back(1e3 * stack.step_seconds(x, policy, precision));
      const double mid = median(ms);
      if (policy == Recompute::kNone) none_ms = mid, none_kept = double(kept);
      const memory::Utilisation u = memory::utilisation(flops, policy, double(o.seq * o.batch), mid / 1e3, peak);
      char formula[32] = "-";
      if (precision == Precision::kFp32)
        std::snprintf(
            formula, sizeof formula, "%.3f",
            double(o.stack.layers * models::activation_bytes(shape, policy, o.stack.dropout > 0, generator)) / 1e6);
      char range[32];
      std::snprintf(range, sizeof range, "%.1f-%.1f", *std::min_element(ms.begin(), ms.end()),
                    *std::max_element(ms.begin(), ms.end()));
      std::printf("%-10s %-5s %9.3f %11s %9.1f %15s %9.0f %6.1f%% %6.1f%% %8.2fx %8.2fx\n", memory::to_string(policy),
                  name.c_str(), double(kept) / 1e6, formula, mid, range, u.tokens_per_second, 100 * u.mfu, 100 * u.hfu,
                  mid / none_ms, double(kept) / none_kept);
    }
    std::printf("%-10s %-5s matmul peak %.1f GFLOP/s\n", "", name.c_str(), peak / 1e9);
  }
}

Registration reg(
    "memory",
    "the memory levers on one process: activations kept, step time, MFU and HFU per "
    "recomputation policy and precision, side by side",
    [](CLI::App& cmd) {
      auto o = std::make_shared<MemoryBenchOptions>();
      o->job.ranks = 1;
      comm::add_job_flags(cmd, o->job);
      cmd.add_option("--layers", o->stack.layers, "Transformer layers")
          ->check(CLI::Range(1, 256))
          ->capture_default_str();
      cmd.add_option("--seq", o->seq, "sequence length")->check(CLI::Range(2, 65536))->capture_default_str();
      cmd.add_option("--batch", o->batch, "batch")->check(CLI::Range(1, 65536))->capture_default_str();
      cmd.add_option("--hidden", o->stack.hidden, "model width d")->check(CLI::Range(1, 65536))->capture_default_str();
      cmd.add_option("--heads", o->stack.heads, "attention heads (must divide --hidden)")
          ->check(CLI::Range(1, 1024))
          ->capture_default_str();
      cmd.add_option("--ffn", o->stack.ffn, "feed-forward width")->check(CLI::Range(1, 262144))->capture_default_str();
      cmd.add_option("--dropout", o->stack.dropout, "dropout")->check(CLI::Range(0.0, 0.99))->capture_default_str();
      cmd.add_option("--precisions", o->precisions, "precisions to run (fp32, bf16; fp16 needs CUDA)")
          ->check(CLI::IsMember({"fp32", "bf16"}))
          ->capture_default_str();
      add_repetition_flags(cmd, o->iters, o->warmup, "steps");
      return on_every_rank(o, run_rank);
    });

}  // namespace
}  // namespace distlab::bench
