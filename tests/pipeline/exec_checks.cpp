#include "exec_checks.hpp"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <sstream>

#include "collectives/collectives.hpp"
#include "pipeline/executor.hpp"
#include "support/differences.hpp"

namespace distlab::pipeline::testing {

namespace {

constexpr int kLayers = 8, kWidth = 6, kBatch = 10, kMicrobatches = 4;

// Layer l of the model, weights sin/cos of their index: the same on every rank.
torch::nn::Linear make_layer(int l) {
  torch::nn::Linear layer(kWidth, kWidth);
  torch::NoGradGuard no_grad;
  const auto n = kWidth * kWidth;
  layer->weight.copy_((at::arange(n, at::kFloat) * 0.37 + l).sin().reshape({kWidth, kWidth}) * 0.6);
  layer->bias.copy_((at::arange(kWidth, at::kFloat) + 3.0 * l).cos() * 0.1);
  return layer;
}

// Layers [first, end) as one module.
torch::nn::Sequential make_stage(int first, int end) {
  torch::nn::Sequential seq;
  for (int l = first; l < end; ++l) {
    seq->push_back(make_layer(l));
    seq->push_back(torch::nn::Tanh());
  }
  return seq;
}

at::Tensor mse(const at::Tensor& out, const at::Tensor& target) {
  return torch::nn::functional::mse_loss(out, target);
}

using test_support::largest_difference;

// How many ranks of `comm` report a loss: exactly one should (the last stage's).
int ranks_with_loss(comm::Communicator& comm, bool has_loss) {
  at::Tensor count = at::full({1}, has_loss ? 1.0f : 0.0f);
  collectives::all_reduce(comm, count);
  return static_cast<int>(count.item<float>());
}

}  // namespace

std::vector<std::string> check_against_unsplit(comm::Communicator& comm) {
  std::vector<std::string> failures;
  const int p = comm.size();
  const at::Tensor input = (at::arange(kBatch * kWidth, at::kFloat) * 0.11).cos().reshape({kBatch, kWidth});
  const at::Tensor target = (at::arange(kBatch * kWidth, at::kFloat) * 0.07).sin().reshape({kBatch, kWidth}) * 0.5;

  // The reference: the whole model on the whole batch, on this rank.
  torch::nn::Sequential whole = make_stage(0, kLayers);
  const at::Tensor ref_loss = mse(whole->forward(input), target);
  ref_loss.backward();
  std::vector<at::Tensor> ref_grads;  // per layer: weight grad, bias grad
  for (size_t k = 0; k < whole->size(); k += 2)
    for (const auto& param : whole[k]->parameters()) ref_grads.push_back(param.grad());

  for (ScheduleKind kind : all_kinds()) {
    const int v = stages_per_rank_for(kind, 2), S = p * v, per_stage = kLayers / S;
    // DualPipeV needs m >= 2p: 8 microbatches of 2, 2, 1, ... rows on 4 ranks.
    const int m = kind == ScheduleKind::kDualPipeV ? std::max(kMicrobatches, 2 * p) : kMicrobatches;
    const Schedule schedule = make_schedule(kind, p, m, v);
    // This rank's stages in stage order: r, r + p, ... looped; r, 2p-1-r in a V.
    std::vector<int> mine;
    for (int s = 0; s < S; ++s)
      if (schedule.rank_of_stage(s) == comm.rank()) mine.push_back(s);
    std::vector<StageModule> stages;
    std::vector<torch::nn::Sequential> modules;
    for (int s : mine) {
      modules.push_back(make_stage(s * per_stage, (s + 1) * per_stage));
      stages.push_back(stage_of(modules.back()));
    }
    ExecutorOptions options;
    options.loss = mse;
    PipelineExecutor pipe(comm, schedule, stages, options);
    const StepResult result = pipe.step(input, target);

    std::ostringstream bad;
    if (result.has_loss && !test_support::within(result.loss - ref_loss.item<double>(), 1e-6))
      bad << " loss " << result.loss << " vs " << ref_loss.item<double>();
    if (const int holders = ranks_with_loss(comm, result.has_loss); holders != 1)
      bad << " " << holders << " ranks hold the loss (one should)";
    for (int c = 0; c < v; ++c) {
      const int s = mine[static_cast<size_t>(c)];
      int k = 0;
      for (const auto& param : modules[c]->parameters()) {
        const int layer = s * per_stage + k / 2;
        const at::Tensor& ref = ref_grads.at(static_cast<size_t>(2 * layer + k % 2));
        if (!param.grad().defined())
          bad << " stage " << s << " parameter " << k << " has no gradient";
        else if (const double d = largest_difference(param.grad(), ref); !test_support::within(d, 1e-5))
          bad << " stage " << s << " layer " << layer << (k % 2 ? " bias" : " weight") << " grad differs by " << d;
        ++k;
      }
    }
    if (!bad.str().empty())
      failures.push_back(std::string(kind_name(kind)) + " p=" + std::to_string(p) + " rank " +
                         std::to_string(comm.rank()) + ":" + bad.str());
  }
  return failures;
}

}  // namespace distlab::pipeline::testing
