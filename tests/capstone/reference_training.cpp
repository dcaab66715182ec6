#include "reference_training.hpp"

#include <torch/types.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <cmath>
#include <cstdio>
#include <optional>

#include "compat/torch.hpp"
#include "data/batching.hpp"
#include "memory/loss_scaler.hpp"
#include "memory/precision.hpp"
#include "models/transformer_lm.hpp"

namespace distlab::tests {

ReferenceResult train_one_process(const data::Corpus& corpus, const train::TrainerOptions& o) {
  auto options = train::model_options(o, static_cast<int64_t>(corpus.vocab.size()));
  torch::manual_seed(o.loop.seed);
  models::TransformerLm model(options);
  model->train();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(o.loop.lr));
  const at::Tensor source = data::batchify(corpus.train, o.loop.batch_size);  // (rows, 20)
  const int64_t V = corpus.vocab.size();
  // The forward in o.plan.memory.precision's guard, the loss (from 16-bit logits under
  // mixed precision) and the backward in float32 outside it, as the trainer.
  const auto forward = [&](const at::Tensor& input) {
    memory::ComputeIn guard(o.plan.memory.precision, c10::DeviceType::CPU);
    return model->forward(input);
  };
  std::optional<memory::LossScaler> scaler;
  if (o.plan.memory.loss_scaling) scaler.emplace(o.plan.memory.loss_scaler);
  ReferenceResult r;
  for (int64_t i = 0; i < o.loop.batches_per_epoch; ++i) {
    const int64_t row = i * o.loop.bptt;
    const at::Tensor input = source.narrow(0, row, o.loop.bptt);           // (S, N)
    const at::Tensor target = source.narrow(0, row + 1, o.loop.bptt);      // (S, N): the next token
    compat::zero_grad(sgd);
    const at::Tensor loss =
        at::cross_entropy_loss(forward(input).reshape({-1, V}).to(at::kFloat), target.reshape({-1}));
    (scaler ? scaler->scale_loss(loss) : loss).backward();
    if (scaler) {
      std::vector<at::Tensor> gradients;
      for (const auto& p : model->parameters()) gradients.push_back(p.grad());
      scaler->unscale(gradients);
    }
    // clip_grad_norm_'s formula, with the squares summed in float64: LibTorch
    // 1.13's own (float32 accumulation) is off by ~1e-5 relative on this
    // model; torch_grad_norms keeps it to show that.
    double squares = 0;
    for (const auto& p : model->parameters()) squares += p.grad().to(at::kDouble).pow(2).sum().item<double>();
    const double norm = std::sqrt(squares);
    r.torch_grad_norms.push_back(torch::nn::utils::clip_grad_norm_(model->parameters(), /*max_norm=*/1e30));
    if (o.loop.clip / (norm + 1e-6) < 1.0) {
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.grad().mul_(o.loop.clip / (norm + 1e-6));
    }
    r.grad_norms.push_back(norm);
    if (scaler) r.loss_scales.push_back(scaler->scale());
    if (!scaler || scaler->update(!std::isfinite(norm)))
      sgd.step();
    else
      r.skipped_steps.push_back(i + 1);  // an overflow: no step
    r.step_losses.push_back(loss.item<double>());
  }
  model->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor valid = data::batchify(corpus.valid, o.loop.eval_batch_size);
  double sum = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < o.loop.eval_batches; ++i) {
    const int64_t row = i * o.loop.bptt;
    const at::Tensor target = valid.narrow(0, row + 1, o.loop.bptt).reshape({-1});
    sum += at::cross_entropy_loss(forward(valid.narrow(0, row, o.loop.bptt)).reshape({-1, V}).to(at::kFloat), target,
                                  {}, at::Reduction::Sum).item<double>();
    tokens += target.numel();
  }
  r.valid_loss = sum / static_cast<double>(tokens);
  for (const auto& item : model->named_parameters()) r.parameters[item.key()] = item.value().detach().clone();
  return r;
}

}  // namespace distlab::tests
