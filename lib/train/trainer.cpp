#include "train/trainer.hpp"

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>

#include "comm/env.hpp"
#include "data/batching.hpp"
#include "models/parameter_count.hpp"
#include "pipeline/stage.hpp"
#include "checkpoint/checkpointer.hpp"
#include "train/elastic.hpp"
#include "train/grad_clip.hpp"
#include "train/model_digest.hpp"
#include "train/data_parallel.hpp"
#include "train/pipeline_forward.hpp"
#include "train/plan.hpp"
#include "train/stage_model.hpp"
#include "train/trainer_state.hpp"
#include "train/training_log.hpp"

namespace distlab::train {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kDigestTag = kEvalTagBase + 1000;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string format_number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

// The stage's forward in the options' precision (memory/precision.hpp);
// the backward, outside it, follows what the forward recorded.
StageForward in_precision(StageForward forward, memory::Precision precision, c10::DeviceType device) {
  if (precision == memory::Precision::kFp32) return forward;
  return [forward = std::move(forward), precision, device](const at::Tensor& x) {
    memory::ComputeIn guard(precision, device);
    return forward(x);
  };
}

// Everything one rank trains with.
struct Run {
  comm::Communicator& world;
  const TrainerOptions& o;
  Groups groups;
  Roles roles;  // the plan's: who prints, who writes checkpoints
  // This rank's stages (one, or v for interleaved and V schedules), each
  // whole or cut across the tensor group, by stage number.
  std::vector<int> stage_numbers;
  std::vector<std::unique_ptr<RankStage>> stages;
  std::vector<int> rank_of_stage;  // every stage's pipeline rank, as the schedule places them
  // How each held stage's replicas keep it equal (DDP or ZeRO-k), each on
  // its own replica group when a rank holds several stages.
  std::vector<std::unique_ptr<comm::Communicator>> stage_replicas;
  std::vector<std::unique_ptr<DataParallelStage>> data_parallel;
  // Expert parallelism: each held stage's expert group and the ranks holding its experts' copies.
  std::vector<std::unique_ptr<comm::Communicator>> expert_groups, expert_copies;
  std::unique_ptr<pipeline::PipelineExecutor> executor;  // one for all of this rank's stages
  std::optional<checkpoint::Checkpointer> checkpoints;
  at::Tensor train_data, valid_data, test_data;  // (rows, columns) int64, CPU
  int64_t ntokens = 0;
  bool first = false, last = false;
  ContextSplit context;     // the stage's context group (C = 1: none)
  std::optional<memory::LossScaler> scaler;  // TrainerOptions::loss_scaling
  double gradient_scale = 1;  // the executor's, before the loss scale
  double aux_loss_scale = 1;  // each layer's auxiliary losses' (experts), before the loss scale
  int64_t batch_rows = 0;   // the rows of the batch in flight before padding (context: the loss's denominator)

  void print(const std::string& line) const {
    if (o.quiet || !roles.prints) return;
    const std::string text = "[RANK " + std::to_string(world.rank()) + "]: " + line + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  void set_lr(double lr) {
    for (auto& dp : data_parallel) dp->set_lr(lr);
  }
  int last_rank() const { return rank_of_stage.back(); }  // the pipeline rank computing the loss

  // The unsplit stages' tensors by their names, all of this rank's stages
  // (each cut across a tensor group: gathered; every tensor rank calls it).
  std::map<std::string, at::Tensor> whole_state(bool parameters_only = false) {
    std::map<std::string, at::Tensor> all;
    for (auto& stage : stages)
      for (auto& [name, tensor] : parameters_only ? stage->whole_parameters() : stage->whole_state()) all[name] = tensor;
    return all;
  }
  std::set<std::string> state_names() const {
    std::set<std::string> names;
    for (const auto& stage : stages) names.merge(stage->state_names());
    return names;
  }
  // Each stage takes its names from `state`, which must hold no others
  // (each stage checks its own are there, with their shapes).
  void load_state(const std::map<std::string, at::Tensor>& state) {
    const std::set<std::string> names = state_names();
    for (const auto& item : state)
      if (!names.count(item.first))
        throw checkpoint::CheckpointError("checkpoint: '" + item.first + "' belongs to no stage of this rank; was it written by "
                              "another model or layout?");
    for (auto& stage : stages) {
      std::map<std::string, at::Tensor> mine;
      for (const std::string& name : stage->state_names())
        if (auto it = state.find(name); it != state.end()) mine.emplace(name, it->second);
      stage->load_whole_state(mine);
    }
  }
  // torch's clip_grad_norm_ over the whole model (grad_clip.hpp): each of
  // this rank's stages' shares, then every stage over the pipeline.
  // Returns the norm before clipping.
  double clip_grad_norm() {
    std::vector<NormShare> shares;
    for (auto& dp : data_parallel)
      for (NormShare& share : dp->norm_shares()) shares.push_back(std::move(share));
    return train::clip_grad_norm(shares, o.clip, groups.pipeline.get());
  }
  void set_training(bool on) {
    for (auto& stage : stages) stage->module()->train(on);
  }

  // The stages' parameters whole until it ends (ZeRO-3 gathers them from
  // the replica group: every replica takes it at the same point).
  std::vector<std::optional<zero::Zero3::WholeParameters>> whole() {
    std::vector<std::optional<zero::Zero3::WholeParameters>> guards;
    for (auto& dp : data_parallel) guards.push_back(dp->whole());
    return guards;
  }
};

// (S, N) input and (S, N) targets of rows i .. i+S of `source`: the
// tutorial's get_batch, turned back to S-first and with the targets aligned
// to the output position by position (target[s][n] follows input[s][n]).
std::pair<at::Tensor, at::Tensor> lm_batch(const at::Tensor& source, int64_t i, int64_t bptt, const at::Device& device) {
  const data::Batch batch = data::get_batch(source, i, bptt);
  const at::Tensor input = batch.data.t().contiguous();
  return {input.to(device), batch.targets.view(input.sizes()).to(device)};
}

// This rank's rows of a batch (S, N) under context parallelism: the
// sequence padded at its end to a multiple of the layout's chunks (token
// 0, targets kPaddedTarget: a causal model's real tokens never see them),
// then this rank's chunks. The batch itself with C = 1.
std::pair<at::Tensor, at::Tensor> my_rows(const ContextSplit& context, const at::Tensor& input, const at::Tensor& target) {
  if (!context.active()) return {input, target};
  const int C = context.group->size();
  const int64_t chunks = context_parallel::chunk_count(context.layout, C);
  const int64_t rows = input.size(0), padded = (rows + chunks - 1) / chunks * chunks;
  at::Tensor in = input, tg = target;
  if (padded > rows) {
    in = at::cat({input, at::zeros({padded - rows, input.size(1)}, input.options())});
    tg = at::cat({target, at::full({padded - rows, target.size(1)}, kPaddedTarget, target.options())});
  }
  const at::Tensor mine = context.positions(padded / C).to(input.device());
  return {in.index_select(0, mine), tg.index_select(0, mine)};
}

// The true mean loss over the first `eval_batches` batches of `source`
// (all when 0). Replicas evaluate every R-th batch and add their sums; the
// last stage tells the other stages. Same value on every rank.
double evaluate(Run& run, const at::Tensor& source) {
  const auto whole = run.whole();  // replicas evaluate different batches: no gathers per forward
  run.set_training(false);
  const int R = run.groups.replica->size(), me = run.groups.place.replica;
  comm::Communicator& averaging = run.groups.averaging();  // the replicas (and context ranks) whose sums add up
  const auto starts = data::batch_starts(source, run.o.bptt, run.o.eval_batches > 0 ? run.o.eval_batches : -1);
  std::map<int, StageForward> forwards;  // this rank's stages by number
  for (size_t c = 0; c < run.stages.size(); ++c)
    forwards[run.stage_numbers[c]] = in_precision([&run, c](const at::Tensor& x) { return run.stages[c]->forward(x); },
                                                  run.o.precision, run.world.device().type());
  LossSum total;
  // Replica `me` takes batches me, me + R, ... Experts spread over replicas
  // need every rank of an expert group in each forward (its all-to-alls):
  // a replica whose batches ran out then runs the first one again, uncounted.
  const size_t rounds = (starts.size() + static_cast<size_t>(R) - 1) / static_cast<size_t>(R);
  for (size_t round = 0; round < rounds; ++round) {
    const size_t k = round * static_cast<size_t>(R) + static_cast<size_t>(me);
    const bool counted = k < starts.size();
    if (!counted && run.o.expert_parallel <= 1) break;
    const auto [whole_input, whole_target] = lm_batch(source, starts[counted ? k : 0], run.o.bptt, run.world.device());
    const auto [input, target] = my_rows(run.context, whole_input, whole_target);
    const LossSum part = forward_loss_sum(*run.groups.pipeline, run.rank_of_stage, forwards, input, target);
    if (!counted) continue;
    total.sum += part.sum;
    total.tokens += part.tokens;
  }
  at::Tensor sums = at::tensor({total.sum, static_cast<double>(total.tokens)}, at::kDouble).to(run.world.device());
  if (run.last && averaging.size() > 1) averaging.native_all_reduce(sums);
  at::Tensor mean = (sums[0] / sums[1].clamp_min(1)).reshape({1}).contiguous();
  if (run.groups.pipeline->size() > 1) run.groups.pipeline->native_broadcast(mean, run.last_rank());
  run.set_training(true);
  return mean.cpu().item<double>();
}

void save(Run& run, const TrainerState& state) {
  if (!run.checkpoints) return;
  const auto whole = run.whole();
  if (!run.roles.gathers_checkpoint) return;
  const auto model = run.whole_state();  // (cut across a tensor group, experts spread: gathered)
  if (!run.roles.writes_checkpoint) return;
  TrainerState with_scale = state;
  if (run.scaler) {
    with_scale.loss_scale = run.scaler->scale();
    with_scale.loss_scale_clean_steps = run.scaler->growth_tracker();
  }
  checkpoint::CheckpointPart part = to_part(model, with_scale, "rank " + std::to_string(run.world.rank()));
  part.texts["layout"] = run.o.layout.text();
  const std::string folder = run.checkpoints->save(state.step, run.groups.place.stage, part);
  if (run.groups.place.stage == 0) run.print("checkpoint " + folder + " (epoch " + std::to_string(state.epoch) +
                                              ", batch " + std::to_string(state.data_position) + ", step " +
                                              std::to_string(state.step) + ")");
}

// This rank's part of the checkpoint of `step`: as written, or re-cut from
// every part when another stage count wrote it (elastic.hpp) or the same
// ranks held other stages (another number of stages per rank).
checkpoint::CheckpointPart load_part(Run& run, int64_t step) {
  const int stage = run.groups.place.stage;
  const int written = run.checkpoints->stages_of(step).value_or(run.o.layout.pipeline);
  const std::set<std::string> names = run.state_names();
  if (written == run.o.layout.pipeline) {
    checkpoint::CheckpointPart part = run.checkpoints->load(step, stage);
    std::set<std::string> held;
    for (const auto& item : part.model) held.insert(item.first);
    if (held == names) return part;
  }
  std::vector<checkpoint::CheckpointPart> parts;
  for (int s = 0; s < written; ++s) parts.push_back(run.checkpoints->load(step, s));
  if (run.world.rank() == 0 && written != run.o.layout.pipeline)
    run.print("re-cutting the " + std::to_string(written) + "-stage checkpoint of step " + std::to_string(step) +
              " into " + std::to_string(run.o.layout.pipeline) + " stage(s)");
  else if (run.world.rank() == 0)
    run.print("re-cutting the checkpoint of step " + std::to_string(step) + ": the ranks hold other layers now (" +
              std::to_string(run.stages.size()) + " stage(s) per rank, placed by " + pipeline::kind_name(run.o.schedule) +
              ")");
  return recut(parts, names, stage);
}

// World rank 0 picks the newest complete checkpoint and tells everybody, so
// all ranks resume from the same one. Returns its step, or -1.
int64_t resume(Run& run, TrainerState& state) {
  at::Tensor chosen = at::full({1}, -1, at::kLong).to(run.world.device());
  if (run.world.rank() == 0) {
    const auto latest = run.checkpoints->latest_complete([&](const std::string& line) { run.print(line); });
    if (latest) chosen.fill_(*latest);
  }
  run.world.native_broadcast(chosen, 0);
  const int64_t step = chosen.cpu().item<int64_t>();
  if (step < 0) {
    if (run.world.rank() == 0) run.print("no checkpoint in " + run.checkpoints->dir() + ": training from step 0");
    return -1;
  }
  const checkpoint::CheckpointPart part = load_part(run, step);
  {
    const auto whole = run.whole();  // ZeRO-3: each replica keeps its chunk of what was loaded
    run.load_state(from_part(part, state));
  }
  if (run.groups.place.replica == 0)  // (print: context rank 0)
    run.print("resumed from " + run.checkpoints->folder(step) + ": stage " + std::to_string(run.groups.place.stage) +
              ", epoch " + std::to_string(state.epoch) + ", batch " + std::to_string(state.data_position) +
              ", step " + std::to_string(state.step) + " (written by " + part.texts.at("written_by") +
              (part.texts.count("layout") ? " of " + part.texts.at("layout") : std::string()) + ")");
  return step;
}

// Under context parallelism each rank's loss is its tokens' share: the
// context ranks' losses average to the replica's mean.
void average_over_context(Run& run, pipeline::StepResult& step) {
  if (!step.has_loss || !run.context.active()) return;
  at::Tensor loss = at::full({1}, step.loss, at::kDouble).to(run.world.device());
  run.groups.context->native_all_reduce(loss);
  step.loss = loss.cpu().item<double>() / run.context.group->size();
}

// The gradients this rank's stages hold after end_step (DDP: whole; ZeRO:
// this rank's shard), the ones clipping sees.
std::vector<at::Tensor> held_gradients(Run& run) {
  std::vector<at::Tensor> all;
  for (auto& dp : run.data_parallel)
    for (const NormShare& share : dp->norm_shares()) all.insert(all.end(), share.gradients.begin(), share.gradients.end());
  return all;
}

// With a loss scaler: the backward's seed times its scale (at
// TrainerOptions::inject_overflow_at_step replica 0's seed is infinite, as
// a scale too large for float16 would make its gradients, before they are
// averaged with the others').
void scale_the_loss(Run& run, int64_t step_number) {
  if (!run.scaler) return;
  const bool overflow = step_number == run.o.inject_overflow_at_step && run.groups.place.replica == 0;
  const double scale = overflow ? std::numeric_limits<double>::infinity() : run.scaler->scale();
  run.executor->set_gradient_scale(run.gradient_scale * scale);
  for (auto& stage : run.stages) stage->set_aux_loss_scale(run.aux_loss_scale * scale);  // experts' losses too
}

// With a loss scaler: the gradients this rank holds divided back by the scale.
void unscale_gradients(Run& run, TrainResult& result) {
  if (!run.scaler) return;
  result.loss_scales.push_back(run.scaler->scale());
  run.scaler->unscale(held_gradients(run));
}

// Whether the optimizer steps: always without a scaler; with one, unless
// the whole model's norm (summed over every rank by the clipping, so every
// rank decides alike) is not finite: then the step is skipped, said, and
// the scale backs off.
bool step_is_taken(Run& run, int64_t step_number, double norm, TrainResult& result) {
  if (!run.scaler) return true;
  const double scale = run.scaler->scale();
  if (run.scaler->update(!std::isfinite(norm))) return true;
  result.skipped_steps.push_back(step_number);
  if (run.last)
    run.print("step " + std::to_string(step_number) + " skipped: the gradients hold an inf or a NaN at loss scale " +
              memory::scale_text(scale) + "; the scale backs off to " + memory::scale_text(run.scaler->scale()));
  return false;
}

// One training step: the pipeline's microbatches, this stage's gradients
// averaged among its replicas (DDP's all-reduce or ZeRO's reduce-scatter),
// the whole model's norm clipped, SGD. Appends the norm to `result`. With
// a loss scaler the gradients are divided back before clipping and a step
// whose gradients are not finite is skipped.
pipeline::StepResult train_step(Run& run, const at::Tensor& input, const at::Tensor& target, int64_t step_number,
                                TrainResult& result) {
  for (auto& dp : run.data_parallel) dp->zero_grad();
  for (auto& dp : run.data_parallel) dp->begin_step();  // the microbatches accumulate without traffic ...
  const auto [my_input, my_target] = my_rows(run.context, input, target);
  run.batch_rows = input.size(0);
  scale_the_loss(run, step_number);
  pipeline::StepResult step = run.executor->step(my_input, my_target);  // ... until each stage's last backward
  for (auto& dp : run.data_parallel) dp->end_step();
  unscale_gradients(run, result);
  const double norm = run.clip_grad_norm();
  result.grad_norms.push_back(norm);
  if (step_is_taken(run, step_number, norm, result))
    for (auto& dp : run.data_parallel) dp->optimizer_step();
  average_over_context(run, step);
  return step;
}

TrainResult train_on_layout(comm::Communicator& world, const data::Corpus& corpus, const TrainerOptions& o,
                            const ParallelPlan& plan) {
  memory::check_precision(o.precision, world.device().type());
  Run run{world, o, plan.make_groups(world), plan.roles_of(plan.place_of(world.rank()))};
  const Place place = run.groups.place;
  const int P = o.layout.pipeline, R = o.layout.replicas;
  run.context = ContextSplit{run.groups.context.get(), o.context_layout, o.context_method};
  TrainResult result;
  result.layout = o.layout;
  result.place = place;

  // Data: training columns shared among replicas (the plan checked there
  // are enough); evaluation splits whole.
  run.train_data = data::shard_for_replica(data::batchify(corpus.train, o.batch_size), place.replica, R,
                                           data::ReplicaSplit::kColumns);
  run.valid_data = data::batchify(corpus.valid, o.eval_batch_size);
  run.test_data = data::batchify(corpus.test, o.eval_batch_size);
  run.ntokens = corpus.vocab.size();

  const int64_t columns = run.train_data.size(1);
  const int64_t chunks = plan.options().microbatches;
  const pipeline::Schedule schedule =
      pipeline::make_schedule(o.schedule, P, static_cast<int>(chunks), o.stages_per_rank);
  // Where the plan puts each of the P * v stages (looped or in a V).
  for (int s = 0; s < plan.stages(); ++s) run.rank_of_stage.push_back(plan.rank_of_stage(s));
  run.stage_numbers = plan.stages_held(place.stage);
  run.first = run.rank_of_stage.front() == place.stage;
  run.last = run.last_rank() == place.stage;

  // Model: this rank's stages, the whole model's initial weights.
  const models::TransformerLmOptions model = model_options(o, run.ntokens);
  for (const int s : run.stage_numbers) {
    run.stages.push_back(
        std::make_unique<RankStage>(build_stage(model, s, schedule.num_stages(), o.seed), *run.groups.tensor, run.context));
    run.stages.back()->module()->to(world.device());
  }
  run.set_training(true);
  world.barrier();  // no rank draws dropout masks while another still builds from the shared generator
  result.parameters = models::count_parameters(model);
  if (world.rank() == 0) run.print(models::format_parameter_count(result.parameters));

  pipeline::ExecutorOptions exec;
  exec.split_dim = 1;  // (S, N): microbatches are columns
  // This replica's share of the batch's columns (uneven when R does not divide the batch).
  exec.gradient_scale = double(R) * double(columns) / double(o.batch_size);
  // Each microbatch's auxiliary losses (experts) weigh as its loss does:
  // 1/m of the replica's step (exact when m divides the replica's columns).
  run.aux_loss_scale = exec.gradient_scale / double(chunks);
  for (auto& stage : run.stages) stage->set_aux_loss_scale(run.aux_loss_scale);
  run.gradient_scale = exec.gradient_scale;
  if (o.loss_scaling) run.scaler.emplace(o.loss_scaler);
  exec.loss = [ntokens = run.ntokens, &run](const at::Tensor& out, const at::Tensor& target) {
    // out (S, n, V), target (S, n); the loss in float32 (16-bit logits under mixed precision)
    const at::Tensor logits = out.reshape({-1, ntokens}).to(at::kFloat), flat = target.reshape({-1});
    if (!run.context.active()) return at::cross_entropy_loss(logits, flat);
    // My tokens' sum over the C-th part of the microbatch's tokens (padding
    // counts for nothing): the context ranks' losses, and their gradients,
    // average to the mean over all of them, as DDP's average over data x
    // context wants.
    const double share = double(run.batch_rows) * double(target.size(1)) / run.context.group->size();
    return at::cross_entropy_loss(logits, flat, /*weight=*/{}, at::Reduction::Sum) / share;
  };
  // Each held stage's data-parallel object (the plan's strategy), then one
  // executor that arms each before that stage's last backward.
  std::vector<pipeline::StageModule> forwards;
  for (size_t c = 0; c < run.stages.size(); ++c) {
    comm::Communicator* replicas = &run.groups.averaging();  // data x context
    if (run.stages.size() > 1) {  // every replica splits in the same order: stage by stage
      run.stage_replicas.push_back(replicas->split(0, replicas->rank(), replicas->group() + "-stage" +
                                                                          std::to_string(run.stage_numbers[c])));
      replicas = run.stage_replicas.back().get();
    }
    comm::Communicator* copies = nullptr;
    if (o.expert_parallel > 1) {  // layout.hpp's expert groups, split from this stage's averaging group
      const int r = replicas->rank();
      const ExpertPlace e = expert_place(r, o.expert_parallel);
      run.expert_groups.push_back(replicas->split(e.block, r, replicas->group() + "-experts"));
      run.expert_copies.push_back(replicas->split(e.copy, r, replicas->group() + "-expert-copies"));
      run.stages[c]->spread_experts(*run.expert_groups.back());
      copies = run.expert_copies.back().get();
    }
    run.data_parallel.push_back(
        make_data_parallel(o.zero, *replicas, *run.groups.tensor, *run.stages[c], o.lr, copies));
    forwards.push_back(run.data_parallel.back()->stage());
    forwards.back().forward = in_precision(std::move(forwards.back().forward), o.precision, world.device().type());
  }
  exec.before_backward = [&run](int stage, int, bool is_last) {
    if (!is_last) return;
    for (size_t c = 0; c < run.stage_numbers.size(); ++c)
      if (run.stage_numbers[c] == stage) run.data_parallel[c]->before_last_backward();
  };
  run.executor = std::make_unique<pipeline::PipelineExecutor>(*run.groups.pipeline, schedule, std::move(forwards), exec);
  if (world.rank() == 0 && chunks != o.chunks)
    run.print("chunks " + std::to_string(chunks) + " (the smallest replica has " + std::to_string(chunks) + " columns)");

  TrainerState state;
  state.lr = o.lr;
  state.best_valid_loss = std::numeric_limits<double>::infinity();
  if (!o.checkpoint_dir.empty()) {
    run.checkpoints.emplace(o.checkpoint_dir, P, o.keep_last);
    run.checkpoints->accept_any_stage_count(o.elastic);
    const int restart = world.backend() == "threads" ? 0 : comm::world_from_env().restart_count;
    if (o.resume || restart > 0) result.resumed_from_step = resume(run, state);
  }
  if (run.scaler && state.loss_scale > 0) run.scaler->restore(state.loss_scale, state.loss_scale_clean_steps);
  run.set_lr(state.lr);  // every stage's optimizer (ZeRO's steps the shard): StepLR's lr reaches whatever steps

  const auto starts = data::batch_starts(run.train_data, o.bptt, o.batches_per_epoch > 0 ? o.batches_per_epoch : -1);
  const int64_t batches = static_cast<int64_t>(starts.size());
  for (; state.epoch <= o.epochs; ++state.epoch, state.data_position = 0) {
    const auto epoch_start = Clock::now();
    auto log_start = Clock::now();
    double log_loss = 0;
    int64_t log_batches = 0, log_tokens = 0;
    for (; state.data_position < batches; ++state.data_position) {
      const auto step_start = Clock::now();
      const auto [input, target] = lm_batch(run.train_data, starts[static_cast<size_t>(state.data_position)], o.bptt,
                                            world.device());
      const pipeline::StepResult step = train_step(run, input, target, state.step + 1, result);
      result.step_seconds.push_back(seconds_since(step_start));
      for (auto& stage : run.stages) stage->record_expert_counts(world.recorder(), world.rank());  // experts' loads
      ++state.step;
      log_tokens += input.numel() * R;  // the whole job's tokens
      if (step.has_loss) {
        result.step_losses.push_back(step.loss);
        log_loss += step.loss;
      }
      if (++log_batches == o.log_interval || state.data_position + 1 == batches) {
        const double elapsed = seconds_since(log_start);
        if (run.last)
          run.print(format_batch_line(state.epoch, state.data_position + 1, batches, state.lr,
                                      elapsed * 1000 / double(log_batches), log_loss / double(log_batches),
                                      double(log_tokens) / elapsed));
        log_loss = 0;
        log_batches = log_tokens = 0;
        log_start = Clock::now();
      }
      const bool epoch_end = state.data_position + 1 == batches;
      if (!epoch_end && o.checkpoint_every > 0 && state.step % o.checkpoint_every == 0) {
        TrainerState saved = state;
        ++saved.data_position;
        save(run, saved);
      }
      if (o.after_step && !epoch_end) o.after_step(state.step);
      if (!epoch_end && state.step == o.stop_after_steps) {
        result.interrupted = true;
        break;
      }
    }
    if (result.interrupted) break;
    const double valid_loss = evaluate(run, run.valid_data);
    result.valid_losses.push_back(valid_loss);
    if (run.last) {
      run.print(rule('-'));
      run.print(format_epoch_line(state.epoch, seconds_since(epoch_start), valid_loss));
      run.print(rule('-'));
    }
    if (valid_loss < state.best_valid_loss) {
      const auto whole = run.whole();
      state.best_valid_loss = valid_loss;
      state.best.clear();
      for (const auto& [name, tensor] : run.whole_state()) state.best[name] = tensor.detach().cpu().clone();
    }
    state.lr *= o.gamma;  // StepLR(step_size 1, gamma)
    run.set_lr(state.lr);
    TrainerState saved = state;
    ++saved.epoch;
    saved.data_position = 0;
    save(run, saved);
    if (o.after_step) o.after_step(state.step);
    if (state.step == o.stop_after_steps && state.epoch < o.epochs) {
      result.interrupted = true;
      ++state.epoch;
      break;
    }
  }
  result.steps = state.step;
  result.best_valid_loss = state.best_valid_loss;
  for (auto& dp : run.data_parallel) result.data_parallel.push_back(dp->stats());
  {
    const auto whole = run.whole();
    const auto parameters = run.whole_state(/*parameters_only=*/true);
    result.digest = model_digest(*run.groups.pipeline, parameters, kDigestTag);
    if (o.keep_final_state)
      for (const auto& [name, tensor] : parameters) result.final_state[name] = tensor.detach().cpu().clone();
  }
  if (result.interrupted) {
    if (run.first && place.replica == 0) run.print("stopped after step " + std::to_string(state.step));
    return result;
  }
  if (!state.best.empty()) {
    const auto whole = run.whole();
    run.load_state(state.best);
  }
  result.test_loss = evaluate(run, run.test_data);
  if (run.last) {
    run.print(rule('='));
    run.print(format_test_line(result.test_loss));
    run.print(rule('='));
  }
  if (world.rank() == 0)
    run.print("final parameters digest " + result.digest + " (" + o.layout.text() + ", " +
              std::to_string(result.steps) + " steps)");
  return result;
}

}  // namespace

int default_stages_per_rank(pipeline::ScheduleKind kind) { return pipeline::stages_per_rank_for(kind, 2); }

models::TransformerLmOptions model_options(const TrainerOptions& o, int64_t vocab_size) {
  models::TransformerLmOptions model = models::transformer_lm_preset(o.preset, vocab_size);
  model.causal = o.causal;
  if (o.dropout >= 0) model.dropout = o.dropout;
  if (o.layers > 0) model.nlayers = o.layers;
  model.moe = o.moe;
  model.recompute = o.recompute;
  return model;
}

FittedLayout layout_for(int world_size, const TrainerOptions& options, int64_t vocab_size) {
  if (!options.elastic) return {options.layout, "the layout asked for: " + options.layout.text()};
  const models::TransformerLmOptions model = model_options(options, vocab_size);
  // Each pipeline rank holds stages_per_rank pieces of at least a layer.
  return fit_layout(world_size, options.layout, static_cast<int>(model.nlayers / std::max(1, options.stages_per_rank)));
}

PlanOptions plan_options(const TrainerOptions& o, int64_t vocab_size) {
  PlanOptions plan;
  plan.layout = o.layout;
  plan.schedule = o.schedule;
  plan.stages_per_rank = o.stages_per_rank;
  plan.zero = o.zero;
  plan.layers = model_options(o, vocab_size).nlayers;
  plan.batch_size = o.batch_size;
  plan.context_layout = o.context_layout;
  plan.context_method = o.context_method;
  plan.heads = model_options(o, vocab_size).nhead;
  plan.causal = o.causal;
  plan.dropout = model_options(o, vocab_size).dropout;
  plan.moe = o.moe;
  plan.expert_parallel = o.expert_parallel;
  plan.recompute = o.recompute;
  plan.precision = o.precision;
  plan.loss_scaling = o.loss_scaling;
  plan.inject_overflow_at_step = o.inject_overflow_at_step;
  // Every replica runs the same schedule: ZeRO-3 gathers each unit once per
  // microbatch, so the replicas of a stage must agree on m even when their
  // columns do not (an uneven split: the last replica has the fewest).
  const int R = o.layout.replicas;
  plan.microbatches =
      o.batch_size >= R && R >= 1 ? std::min(o.chunks, data::replica_columns(o.batch_size, R - 1, R).count) : o.chunks;
  return plan;
}

TrainResult train(comm::Communicator& world, const data::Corpus& corpus, const TrainerOptions& options) {
  const int64_t vocab = static_cast<int64_t>(corpus.vocab.size());
  TrainerOptions fitted = options;
  const FittedLayout layout = layout_for(world.size(), options, vocab);
  fitted.layout = layout.layout;
  const ParallelPlan plan(plan_options(fitted, vocab));
  try {
    plan.check();  // before any collective: every rank fails alike
    const std::string refused = world.shares_engine_thread() ? plan.refusal_on_a_shared_engine_thread() : "";
    if (!refused.empty()) throw std::invalid_argument(refused);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(world.self() + ": " + e.what());
  }
  if (world.rank() == 0 && !options.quiet && fitted.layout.text() != options.layout.text()) {
    const std::string line = "[RANK 0]: elastic: " + layout.reason + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  }
  return train_on_layout(world, corpus, fitted, plan);
}

}  // namespace distlab::train
