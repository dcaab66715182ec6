#include "step_bench.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>

#include "bench_registry.hpp"
#include "models/square_mlp.hpp"

namespace distlab::bench {

void add_step_flags(CLI::App& cmd, StepOptions& o) {
  cmd.add_option("--width", o.width, "features of each Linear layer")->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd.add_option("--layers", o.layers, "Linear layers")->check(CLI::Range(1, 1024))->capture_default_str();
  cmd.add_option("--rows", o.rows, "rows per rank per step")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd.add_option("-n,--iters", o.iters, "timed steps per round")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd.add_option("-w,--warmup_iters", o.warmup, "untimed steps first")->check(CLI::Range(0, 100000))
      ->capture_default_str();
  cmd.add_option("--rounds", o.rounds, "rounds in which the variants take turns")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd.add_option("--bucket-mb", o.bucket_mb, "bucket cap, MiB (the first bucket is 1 MiB)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd.add_flag("--bucket-view", o.bucket_view, "DDP's .grad shares the buckets' memory (gradient_as_bucket_view)");
  cmd.add_option("--threads", o.threads, "intra-op threads per rank (0: cores / ranks on this machine)")
      ->check(CLI::Range(0, 1024))->capture_default_str();
  cmd.add_option("--optimizer", o.optimizer, "sgd (no state), momentum (SGD with momentum 0.9) or adam; lr 1e-6")
      ->check(CLI::IsMember({"sgd", "momentum", "adam"}))->capture_default_str();
}

torch::nn::Sequential make_model(const StepOptions& o) {
  return models::square_mlp(o.layers, o.width, models::Activation::kReLU);
}

at::Tensor make_input(const StepOptions& o) { return at::randn({o.rows, o.width}); }

zero::OptimizerFactory make_optimizer(const std::string& name) {
  constexpr double kLr = 1e-6;  // small: the weights barely move, so every step costs the same
  if (name == "adam") return zero::adam(torch::optim::AdamOptions(kLr));
  if (name == "momentum") return zero::sgd(torch::optim::SGDOptions(kLr).momentum(0.9));
  return zero::sgd(torch::optim::SGDOptions(kLr));
}

int64_t optimizer_state_bytes(const std::string& name) {
  if (name == "adam") return 8;      // exp_avg, exp_avg_sq
  if (name == "momentum") return 4;  // momentum_buffer
  return 0;
}

int share_cores(int requested) {
  if (requested > 0) at::set_num_threads(requested);
  return at::get_num_threads();
}

double seconds_per_step(comm::Communicator& comm, int steps, const std::function<void()>& step) {
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) step();
  at::Tensor t = at::full({1}, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                          at::kDouble);
  comm.native_all_reduce(t, comm::ReduceOp::kMax);
  return t.item<double>() / steps;
}

Spread spread_of(const std::vector<double>& values) {
  if (values.empty()) return {};
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  return {median(values), *low, *high};
}

}  // namespace distlab::bench
