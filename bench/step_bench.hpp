// What the step benchmarks (distlab-bench ddp, distlab-bench zero) share:
// the model, the options and their flags, the optimizer, and how a step is
// timed. bench/ddp_step_args.py is the same definition for the Python side
// (bench/pytorch_ddp_step.py, bench/ddp_vs_pytorch.py), so that both sides
// of a comparison always get the same model and timing.
//
// The model: --layers x Linear(--width, --width) + ReLU (at the defaults
// 25.2 M parameters, 101 MB of float32 gradients), loss mean(y^2); each
// rank --rows random rows per step. A time is the slowest rank's mean step
// over -n steps, after -w untimed ones; variants take turns in --rounds
// rounds, so that other load on a shared machine slows them alike.
#pragma once

#include <CLI/CLI.hpp>
#include <torch/nn/modules/container/sequential.h>

#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "zero/optimizer_factory.hpp"

namespace distlab::bench {

struct StepOptions {
  int width = 2048, layers = 6, rows = 16;
  int iters = 3, warmup = 2, rounds = 3;
  double bucket_mb = 25;
  bool bucket_view = false;  // DdpOptions::gradient_as_bucket_view
  int threads = 0;
  std::string optimizer = "sgd";  // sgd (no state), momentum (SGD, 0.9), adam; lr 1e-6 for all

  int64_t parameters() const { return static_cast<int64_t>(layers) * (static_cast<int64_t>(width) * width + width); }
  int64_t bucket_cap_bytes() const { return static_cast<int64_t>(bucket_mb * 1024 * 1024); }
};

// --width --layers --rows -n -w --rounds --bucket-mb --bucket-view --threads --optimizer,
// their defaults as `o` holds them.
void add_step_flags(CLI::App& cmd, StepOptions& o);

// Weights as LibTorch initialises them; DDP's and ZeRO's broadcast makes them equal.
torch::nn::Sequential make_model(const StepOptions& o);
// The (rows, width) input of this rank.
at::Tensor make_input(const StepOptions& o);
// The loss every variant computes from the model's output.
inline at::Tensor loss_of(const at::Tensor& y) { return y.pow(2).mean(); }

// --optimizer as a factory (DDP calls it with all parameters, ZeRO with its
// shard), and the bytes of state it keeps per float32 parameter (0, 4, 8).
zero::OptimizerFactory make_optimizer(const std::string& name);
int64_t optimizer_state_bytes(const std::string& name);

// run_job gives each rank cores / ranks intra-op threads (PyTorch's side
// does the same); `requested` > 0 overrides it. Returns the count in use.
int share_cores(int requested);

// The slowest rank's seconds per step over `steps` steps.
double seconds_per_step(comm::Communicator& comm, int steps, const std::function<void()>& step);

// A set of measurements: the middle one and the extremes.
struct Spread {
  double median = 0, low = 0, high = 0;
};
Spread spread_of(const std::vector<double>& values);

}  // namespace distlab::bench
