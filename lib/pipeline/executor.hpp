// Runs any schedule of schedule.hpp for real, one rank per pipeline rank of
// `comm` (the whole world, or a stage group of a larger job).
//
//   auto schedule = pipeline::make_schedule(pipeline::ScheduleKind::k1F1B, comm.size(), /*microbatches=*/8);
//   pipeline::PipelineExecutor pipe(comm, schedule, {pipeline::stage_of(my_half)}, options);
//   auto result = pipe.step(tokens, targets);   // gradients now in each parameter's .grad
//   optimizer.step();                           // or DDP's all-reduce first
//
// What step() does:
// - cuts `input` (used on the rank of stage 0) and `target` (on the rank of
//   the last stage) into m microbatches along options.split_dim (the pipelining tutorial's
//   GPT is batch_first=False: cut its (S, N) tokens along dim 1);
// - runs this rank's actions in order. RECV waits (irecv + wait) where the
//   schedule puts it; SEND posts an isend and the step waits for all sends at
//   its end, exactly the semantics the checker proves deadlock-free; an
//   activation's send is waited (and its tensor let go) earlier, when its
//   gradient has come back: the peer had it whole to compute that;
// - activations travel with a small header first (int64: dtype, ndim, sizes)
//   because a receiver cannot know a stage's output shape in general (the
//   last microbatch may be smaller, a stage may change the shape); gradients
//   need none: the gradient of an output has the output's shape, which its
//   stage kept. One extra tiny message per activation is the cost;
// - computes the loss of each microbatch on the last stage and scales it by
//   its share of the batch (n_i / N), so the summed gradients equal those of
//   the whole batch's mean loss (for equal microbatches that is torch's 1/m);
// - accumulates gradients into .grad (zero them before the step yourself, as
//   with any optimizer), never touching other state: DDP can all-reduce them.
//
// Zero bubble (I and W): I is torch::autograd::grad with respect to the
// stage's input only (retain_graph), W later is autograd::backward with
// inputs = the stage's parameters. LibTorch 1.13 runs only the graph edges a
// call needs, so I skips the weight-gradient matmuls and W really is
// deferred; but W walks the stage's graph again from its output, so the
// input-gradient chain inside the stage is computed twice (once by I, once
// to reach the weights). The lesson and the benchmark measure that cost.
//
// OVERLAP_F_B (DualPipeV): its forward half and its backward half run one
// after the other inside the action, each recorded as its own F and B
// event. On CPU ranks the two halves would share the rank's cores, so
// running them at once hides no compute (docs/benchmarks-pipeline.md times
// both ways); a GPU version would put them on two streams.
//
// Every wait uses the communicator's timeout; a failure names the rank, the
// action ("1RECV_F2") and the peer.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "pipeline/schedule.hpp"
#include "pipeline/stage.hpp"

namespace distlab::pipeline {

struct ExecutorOptions {
  int64_t split_dim = 0;         // microbatches are cut along this dimension of the input
  int64_t target_split_dim = -1; // ... and of the target (-1: split_dim)
  // Mean loss of one microbatch: (last stage's output, that microbatch's target) -> scalar.
  std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)> loss;
  // Multiplies what backward starts from (not the loss reported). A
  // replica holding n of the N columns of a batch that R replicas average
  // passes R n / N: the average of the replicas' gradients is then the
  // whole batch's, also when the columns do not split evenly.
  double gradient_scale = 1.0;
  // Messages use tags [tag_base, tag_base + 4 S m): keep them apart from
  // other traffic on the same communicator. Below 2^20 (collectives/tags.hpp).
  int tag_base = 0;
  int64_t step = 0;  // shown in trace events' args; step() counts it up
  // Called just before each action that accumulates weight gradients into
  // .grad (B, or W of a split backward, or I where the stage does not split
  // its backward: StageModule::splits_backward) with its stage, microbatch and
  // whether it is that stage's last one in this step. A DDP-wrapped stage
  // turns synchronization on before the last (train/data_parallel.hpp),
  // so gradients are all-reduced once per step, not once per microbatch.
  std::function<void(int stage, int microbatch, bool is_last)> before_backward;
};

struct StepResult {
  bool has_loss = false;  // true on the rank holding the last stage
  double loss = 0;        // the whole batch's mean loss
  std::vector<double> microbatch_losses;  // each microbatch's own mean loss
};

class PipelineExecutor {
 public:
  // `stages`: this rank's stages, in the order of their stage numbers
  // (rank r holds r, r + p, ... under looped placement; r and 2p-1-r in the
  // V of ZBV and DualPipeV). Throws ScheduleError for a schedule that is
  // invalid or does not fit comm.
  PipelineExecutor(comm::Communicator& comm, Schedule schedule, std::vector<StageModule> stages,
                   ExecutorOptions options);
  ~PipelineExecutor();

  StepResult step(const at::Tensor& input, const at::Tensor& target);
  const Schedule& schedule() const { return schedule_; }
  // ExecutorOptions::gradient_scale from the next step on (a loss scaler's
  // scale changes between steps).
  void set_gradient_scale(double scale) { options_.gradient_scale = scale; }

 private:
  struct State;
  comm::Communicator& comm_;
  Schedule schedule_;
  std::vector<StageModule> stages_;
  ExecutorOptions options_;
};

}  // namespace distlab::pipeline
