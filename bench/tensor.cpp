// distlab-bench tensor: what tensor parallelism costs, measured beside the
// alpha-beta model's prediction, side by side in one run.
//
//   distlab-bench tensor --backend threads --ranks 4
//   distlab-run --nproc-per-node 4 -- distlab-bench tensor --backend gloo
//
// For each tensor size t that divides the world (1, 2, 4, ...) the world is
// cut into groups of t consecutive ranks, every group running the same
// layers cut t ways (lib/tensor_parallel/layer.hpp's ParallelEncoderLayer,
// from the same unsplit weights): "layer" is one layer of the capstone's
// preset, "model" its nlayers. Per t, with and without sequence
// parallelism, rank 0 prints:
//
//   step ms     the median of -n forward + backward steps (after -w)
//   predicted   compute + communication: the t = 1 step's time / t (each
//               rank does 1/t of the matrix work) plus the cost model's
//               price (collectives/cost_model.hpp) of the layer's
//               collectives, 4 per layer per step, each over (S, N, E)
//               float32 (SP: 2 all-gathers and 2 reduce-scatters, the same
//               ring bytes), on the link collectives::calibrate measured
//   sent        the bytes rank 0 sent in one step, read from the trace (each
//               ring step's span carries its bytes), beside the plan's
//   act/rank    the activations rank 0's forward keeps for backward,
//               measured with the allocator (tensor_parallel::
//               measure_forward_bytes), beside the float32 derivation of
//               tensor_parallel/memory.hpp: sequence parallelism divides
//               what plain tensor parallelism leaves whole
//
// The sequence is --seq 36, not the capstone's 35, so that t = 2, 3, 4 split
// it for sequence parallelism. On a machine whose ranks share few cores the
// t = 1 groups compete for them as much as the larger ones do: the ratios
// speak of this machine.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/transformerlayer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <memory>
#include <vector>

#include "bench_registry.hpp"
#include "collectives/calibrate.hpp"
#include "collectives/collectives.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "compat/torch.hpp"
#include "models/transformer_lm.hpp"
#include "ranks.hpp"
#include "tensor_parallel/layer.hpp"
#include "tensor_parallel/memory.hpp"
#include "trace/recorder.hpp"

namespace distlab::bench {
namespace {

struct TensorBenchOptions {
  comm::JobOptions job;
  std::string preset = "cpu";
  int64_t seq = 36, batch = 20;
  int iters = 5, warmup = 2;
};

// The unsplit layers, the same on every rank (a generator of their own:
// thread ranks build them at once).
std::vector<torch::nn::TransformerEncoderLayer> unsplit_layers(const models::TransformerLmOptions& m, int64_t count) {
  at::Generator g = at::detail::createCPUGenerator(17);
  std::vector<torch::nn::TransformerEncoderLayer> layers;
  at::NoGradGuard no_grad;
  for (int64_t i = 0; i < count; ++i) {
    torch::nn::TransformerEncoderLayer layer(
        torch::nn::TransformerEncoderLayerOptions(m.emsize, m.nhead).dim_feedforward(m.nhid).dropout(0.0));
    for (auto& p : layer->parameters()) p.copy_(0.05 * at::randn(p.sizes(), g));
    layers.push_back(layer);
  }
  return layers;
}

struct Measured {
  double step_ms = 0;
  int64_t sent = 0;         // bytes rank 0 sent in one step
  int64_t activations = 0;  // bytes rank 0's forward keeps for backward (-1: not measured on this rank)
};

Measured measure(comm::Communicator& world, comm::Communicator& group, const TensorBenchOptions& o,
                 const models::TransformerLmOptions& m, int64_t count, bool sp, trace::MemorySink& events) {
  const tensor_parallel::ParallelOptions options{sp};
  std::vector<tensor_parallel::ParallelEncoderLayer> layers;
  for (const auto& full : unsplit_layers(m, count)) layers.emplace_back(group, full, options);
  const at::Tensor mask = at::triu(at::full({o.seq, o.seq}, -std::numeric_limits<float>::infinity()), 1);
  const int64_t rows = sp ? o.seq / group.size() : o.seq;
  const at::Tensor x = at::randn({rows, o.batch, m.emsize}).requires_grad_(true);
  auto step = [&] {
    at::Tensor h = x;
    for (auto& layer : layers) h = layer(h, mask);
    h.pow(2).mean().backward();
    for (auto& layer : layers) compat::zero_grad(*layer);
  };
  for (int k = 0; k < o.warmup; ++k) step();
  world.barrier();
  std::vector<double> ms;
  Measured out;
  for (int k = 0; k < o.iters; ++k) {
    const int64_t from = trace::now_us();
    const auto start = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    const int64_t to = trace::now_us();
    if (k == 0) out.sent = trace::bytes_sent(events.events(), world.world_rank(), from, to);
  }
  world.barrier();
  out.step_ms = median(ms);
  out.activations = tensor_parallel::measure_forward_bytes(world, [&] {
    at::Tensor h = x;
    for (auto& layer : layers) h = layer(h, mask);
    return h;
  });
  return out;
}

// The cost model's seconds and bytes for one step's collectives.
struct Predicted {
  double seconds = 0;
  int64_t sent = 0;
};

Predicted communication(comm::Communicator& group, const models::TransformerLmOptions& m, const TensorBenchOptions& o,
                        int64_t count, bool sp, const collectives::LinkParams& link) {
  Predicted out;
  if (group.size() == 1) return out;
  const at::Tensor whole = at::empty({o.seq, o.batch, m.emsize});
  // Per layer and step: without SP the attention's and the MLP's g forward
  // and their f backward, 4 all-reduces; with SP an all-gather in and a
  // reduce-scatter out of each region forward, the reverse backward: 8.
  std::vector<collectives::Collective> per_layer;
  if (sp)
    for (int k = 0; k < 4; ++k)
      for (const auto c : {collectives::Collective::kAllGather, collectives::Collective::kReduceScatter})
        per_layer.push_back(c);
  else
    per_layer.assign(4, collectives::Collective::kAllReduce);
  for (const collectives::Collective c : per_layer) {
    const collectives::Prediction p =
        collectives::predict(collectives::plan_for(group, c, collectives::Algorithm::kRing, whole), link);
    out.seconds += p.total_seconds * static_cast<double>(count);
    out.sent += p.max_bytes_sent_per_rank * count;
  }
  return out;
}

void run_rank(comm::Communicator& world, const TensorBenchOptions& o) {
  auto events = std::make_shared<trace::MemorySink>();
  if (world.backend() != "threads" || world.rank() == 0) world.recorder_ptr()->add_sink(events);  // threads share one
  world.barrier();
  const models::TransformerLmOptions m = models::transformer_lm_preset(o.preset, 1000);
  const collectives::LinkParams link = collectives::calibrate(world);
  if (world.rank() == 0) {
    std::printf("distlab-bench tensor: preset %s (E %lld, %lld heads, feed-forward %lld, %lld layers), "
                "(S %lld, N %lld), %s; link alpha %.1f us, %.2f GB/s\n",
                o.preset.c_str(), static_cast<long long>(m.emsize), static_cast<long long>(m.nhead),
                static_cast<long long>(m.nhid), static_cast<long long>(m.nlayers), static_cast<long long>(o.seq),
                static_cast<long long>(o.batch), comm::backend_ranks(world.size(), world.backend()).c_str(),
                link.alpha_s * 1e6, link.beta_s_per_byte > 0 ? 1e-9 / link.beta_s_per_byte : 0.0);
    std::printf("%-6s %2s %3s %10s %13s %7s %12s %14s %10s %10s\n", "what", "t", "SP", "step ms", "predicted ms",
                "ratio", "sent/step", "predicted sent", "act/rank", "formula");
  }
  std::map<std::string, double> alone_ms;  // t = 1: the compute of one rank doing all of it
  for (int t = 1; t <= world.size(); ++t) {
    if (world.size() % t != 0 || m.nhead % t != 0 || m.nhid % t != 0) continue;
    auto group = world.split(world.rank() / t, world.rank(), "tensor" + std::to_string(t));
    for (const auto& [what, count] : {std::pair<std::string, int64_t>{"layer", 1}, {"model", m.nlayers}}) {
      for (const bool sp : {false, true}) {
        if (sp && (t == 1 || o.seq % t != 0)) continue;
        const Measured got = measure(world, *group, o, m, count, sp, *events);
        if (t == 1) alone_ms[what] = got.step_ms;
        const Predicted comm_cost = communication(*group, m, o, count, sp, link);
        const double predicted_ms = alone_ms[what] / t + comm_cost.seconds * 1e3;
        const tensor_parallel::LayerShape shape{o.seq, o.batch, m.emsize, m.nhead, m.nhid};
        // count layers keep count times one layer's bytes (which include the
        // layer's output, held by the caller), except that under sequence
        // parallelism a layer's output (my S/t rows) is kept by nobody once
        // the next layer has all-gathered it: that layer keeps the gathered copy.
        const int64_t rows_out = sp ? (o.seq / t) * o.batch * m.emsize * 4 : 0;
        const int64_t formula =
            tensor_parallel::distlab_activation_bytes(shape, t, sp, /*dropout=*/false).total() * count -
            (count - 1) * rows_out;
        if (world.rank() == 0)
          std::printf("%-6s %2d %3s %10.2f %13.2f %7.2f %12s %14s %10s %10s\n", what.c_str(), t, sp ? "yes" : "no",
                      got.step_ms, predicted_ms, got.step_ms / predicted_ms, format_size(got.sent).c_str(),
                      format_size(comm_cost.sent).c_str(), format_size(got.activations).c_str(),
                      format_size(formula).c_str());
        std::fflush(stdout);
      }
    }
  }
}

Registration reg("tensor", "tensor parallelism (Megatron's layer, with and without sequence parallelism): "
                           "step time and bytes beside the cost model",
                 [](CLI::App& cmd) {
  auto o = std::make_shared<TensorBenchOptions>();
  comm::add_job_flags(cmd, o->job);
  cmd.add_option("--preset", o->preset, "the capstone's model preset (tiny, cpu, tutorial)")->capture_default_str();
  cmd.add_option("--seq", o->seq, "sequence length S (a multiple of t for sequence parallelism)")
      ->check(CLI::Range(1, 1 << 16))->capture_default_str();
  cmd.add_option("--batch", o->batch, "batch N")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  add_repetition_flags(cmd, o->iters, o->warmup, "steps");
  return on_every_rank(o, run_rank);
});

}  // namespace
}  // namespace distlab::bench
