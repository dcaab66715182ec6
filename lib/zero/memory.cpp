#include "zero/memory.hpp"

#include "memory/allocator_meter.hpp"

#include <c10/core/StorageImpl.h>

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>


namespace distlab::zero {

std::vector<std::pair<std::string, int64_t>> MemoryUse::series() const {
  return {{"parameters", parameters},
          {"gradients", gradients},
          {"optimizer state", optimizer_state},
          {"buffers", buffers},
          {"activations", activations}};
}

std::string memory_counter(const std::string& who) { return "memory " + who; }
std::string accounting_counter(const std::string& who) { return "accounting " + who; }

void record_memory(trace::Recorder* recorder, int rank, const std::string& who, const MemoryUse& measured,
                   const MemoryUse& accounting) {
  if (recorder == nullptr || !recorder->enabled()) return;
  recorder->counter(rank, memory_counter(who), measured.series());
  recorder->counter(rank, accounting_counter(who), accounting.series());
}

const char* to_string(Stage stage) {
  switch (stage) {
    case Stage::kDdp:
      return "DDP";
    case Stage::kZero1:
      return "ZeRO-1";
    case Stage::kZero2:
      return "ZeRO-2";
    case Stage::kZero3:
      return "ZeRO-3";
  }
  return "?";
}

MemoryUse accounting(Stage stage, int64_t psi, int ranks, int64_t bytes, int64_t optimizer_bytes) {
  const int64_t p = ranks;
  MemoryUse m;
  m.parameters = bytes * psi / (stage == Stage::kZero3 ? p : 1);
  m.gradients = bytes * psi / (stage == Stage::kZero2 || stage == Stage::kZero3 ? p : 1);
  m.optimizer_state = optimizer_bytes * psi / (stage == Stage::kDdp ? 1 : p);
  return m;
}

namespace {

// The tensors one parameter's state holds, for each optimizer LibTorch has
// (LBFGS keeps its state per group, not per parameter).
std::vector<at::Tensor> state_tensors(const torch::optim::OptimizerParamState& state) {
  using namespace torch::optim;
  if (const auto* s = dynamic_cast<const SGDParamState*>(&state)) return {s->momentum_buffer()};
  if (const auto* s = dynamic_cast<const AdamParamState*>(&state))
    return {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()};
  if (const auto* s = dynamic_cast<const AdamWParamState*>(&state))
    return {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()};
  if (const auto* s = dynamic_cast<const AdagradParamState*>(&state)) return {s->sum()};
  if (const auto* s = dynamic_cast<const RMSpropParamState*>(&state))
    return {s->square_avg(), s->momentum_buffer(), s->grad_avg()};
  return {};
}

}  // namespace

int64_t StorageCounter::add(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return 0;
  if (!seen_.insert(t.storage().unsafeGetStorageImpl()).second) return 0;
  return static_cast<int64_t>(t.storage().nbytes());
}

MemoryUse measure_memory(const std::vector<at::Tensor>& parameters, const torch::optim::Optimizer* optimizer) {
  StorageCounter counted;
  MemoryUse m;
  for (const at::Tensor& p : parameters) m.parameters += counted.add(p);
  for (const at::Tensor& p : parameters) m.gradients += counted.add(p.grad());
  if (optimizer != nullptr)
    for (const auto& [key, state] : optimizer->state()) {
      for (const at::Tensor& t : state_tensors(*state)) m.optimizer_state += counted.add(t);
    }
  return m;
}


void StepPeaks::buffer_allocated(int64_t bytes) { memory::raise_to(buffers_peak_, buffers_now_ += bytes); }

void StepPeaks::note_activations(int64_t bytes) { memory::raise_to(activations_peak_, bytes); }

void StepPeaks::reset() {
  buffers_peak_ = buffers_now_.load();
  activations_peak_ = 0;
}

}  // namespace distlab::zero
