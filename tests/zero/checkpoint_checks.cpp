#include "checkpoint_checks.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/types.h>

#include <memory>
#include <sstream>
#include <stdexcept>

#include "checkpoint/files.hpp"
#include "zero_checks.hpp"
#include "zero/sharded_checkpoint.hpp"

namespace distlab::zero::testing {
namespace {

// Weights from a generator of their own: thread ranks build models at once.
torch::nn::Sequential make_model(uint64_t seed) {
  torch::nn::Sequential model(torch::nn::Linear(6, 9), torch::nn::Tanh(), torch::nn::Linear(9, 7), torch::nn::Tanh(),
                              torch::nn::Linear(7, 3));
  auto gen = at::detail::createCPUGenerator(seed);
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.copy_((at::rand(p.sizes(), gen) * 2 - 1) * 0.5);
  return model;
}

// Step s's rows are [s * kBatch, (s + 1) * kBatch): x (rows, 6), y (rows, 3).
struct Data {
  at::Tensor x, y;
};
Data make_data() {
  auto gen = at::detail::createCPUGenerator(42);
  return {at::randn({kLastStep * kBatch, 6}, gen, at::kFloat), at::randn({kLastStep * kBatch, 3}, gen, at::kFloat)};
}

OptimizerFactory factory(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kSgdMomentum: return sgd(torch::optim::SGDOptions(0.1).momentum(0.9));
    case Optimizer::kAdam: return adam(torch::optim::AdamOptions(0.01));
    case Optimizer::kAdamWAmsgrad: return adamw(torch::optim::AdamWOptions(0.01).amsgrad(true));
  }
  return adam(torch::optim::AdamOptions(0.01));
}

at::Tensor flat(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> pieces;
  for (const at::Tensor& p : params) pieces.push_back(p.detach().reshape({-1}));
  return at::cat(pieces).clone();
}

}  // namespace

const char* to_string(Sharding sharding) {
  switch (sharding) {
    case Sharding::kZero1: return "ZeRO-1";
    case Sharding::kZero2: return "ZeRO-2";
    case Sharding::kZero3: return "ZeRO-3";
  }
  return "?";
}

const char* to_string(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kSgdMomentum: return "SGD+momentum";
    case Optimizer::kAdam: return "Adam";
    case Optimizer::kAdamWAmsgrad: return "AdamW amsgrad";
  }
  return "?";
}

at::Tensor fresh_parameters() { return flat(make_model(99)->parameters()); }

at::Tensor train_steps(comm::Communicator& comm, const TrainSteps& run) {
  // A resumed run starts from weights the checkpoint must overwrite; a fresh
  // one from rank 0's (ZeRO broadcasts them; the others' differ on purpose).
  auto model = make_model(!run.load_dir.empty() ? 99 : comm.rank() == 0 ? 7 : 1000 + static_cast<uint64_t>(comm.rank()));
  const Data data = make_data();
  const int64_t rows = kBatch / comm.size();
  auto local = [&](const at::Tensor& t, int step) { return t.narrow(0, step * kBatch + comm.rank() * rows, rows); };
  ZeroOptions options;
  options.bucket_cap_bytes = 160;  // several buckets, cut inside parameters
  options.first_bucket_bytes = 80;

  std::unique_ptr<ShardedCheckpointer> checkpoints_in, checkpoints_out;
  if (!run.load_dir.empty()) checkpoints_in = std::make_unique<ShardedCheckpointer>(run.load_dir);
  if (!run.save_dir.empty()) checkpoints_out = std::make_unique<ShardedCheckpointer>(run.save_dir);

  if (run.sharding == Sharding::kZero3) {
    Zero3 zero(comm, model, factory(run.optimizer));
    if (checkpoints_in) checkpoints_in->load(run.first, zero);
    for (int step = run.first; step < run.last; ++step) {
      zero.zero_grad();
      torch::nn::functional::mse_loss(zero.forward(local(data.x, step)), local(data.y, step)).backward();
      zero.step();
    }
    if (checkpoints_out) checkpoints_out->save(run.last, zero);
    return flat(zero.full_parameters());
  }
  auto train = [&](auto& zero) {
    if (checkpoints_in) checkpoints_in->load(run.first, zero, *model);
    for (int step = run.first; step < run.last; ++step) {
      zero.zero_grad();
      torch::nn::functional::mse_loss(model->forward(local(data.x, step)), local(data.y, step)).backward();
      zero.step();
    }
    if (checkpoints_out) checkpoints_out->save(run.last, zero, *model);
  };
  if (run.sharding == Sharding::kZero1) {
    Zero1 zero(comm, *model, factory(run.optimizer), options);
    train(zero);
  } else {
    Zero2 zero(comm, *model, factory(run.optimizer), options);
    train(zero);
  }
  return flat(model->parameters());
}

std::vector<std::string> save_or_resume(comm::Communicator& comm, const std::string& mode, const std::string& dir) {
  const std::vector<std::pair<Sharding, Optimizer>> cases = {{Sharding::kZero1, Optimizer::kAdam},
                                                             {Sharding::kZero2, Optimizer::kSgdMomentum},
                                                             {Sharding::kZero3, Optimizer::kAdam}};
  if (mode != "save" && mode != "resume")
    throw std::invalid_argument("checkpoint mode '" + mode + "': expected 'save' or 'resume'");
  std::vector<std::string> lines;
  for (const auto& [sharding, optimizer] : cases) {
    const std::string name = std::string(to_string(sharding)) + " " + to_string(optimizer);
    const std::string folder = dir + "/" + to_string(sharding) + "_" + std::to_string(static_cast<int>(optimizer));
    const std::string reference = folder + "/uninterrupted.pt";
    if (mode == "save") {
      const at::Tensor uninterrupted = train_steps(comm, {sharding, optimizer, 0, kLastStep, "", ""});
      train_steps(comm, {sharding, optimizer, 0, kSaveStep, "", folder});
      if (comm.rank() == 0) checkpoint::write_file_atomically(reference, torch::jit::pickle_save(uninterrupted));
      lines.push_back(name + ": saved step " + std::to_string(kSaveStep) + " on " + std::to_string(comm.size()) +
                      " ranks");
      continue;
    }
    const at::Tensor resumed = train_steps(comm, {sharding, optimizer, kSaveStep, kLastStep, folder, ""});
    const at::Tensor expected = torch::jit::pickle_load(checkpoint::read_whole_file(reference)).toTensor();
    const double difference = (resumed - expected).abs().max().item<double>();
    std::ostringstream line;
    line << (difference <= kTolerance ? "" : "MISMATCH ") << name << ": resumed on rank " << comm.rank() << " of "
         << comm.size() << ", max difference " << difference << " from the uninterrupted run";
    lines.push_back(line.str());
  }
  return lines;
}

}  // namespace distlab::zero::testing
