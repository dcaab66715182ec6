// The trainer: one rank's run set up from the plan's build, the epochs
// (steps, evaluation, the best model, checkpoints), the test of the best
// model, and the options' translation into the plan's.
#include "train/trainer.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "comm/env.hpp"
#include "data/batching.hpp"
#include "memory/recompute.hpp"
#include "models/parameter_count.hpp"
#include "train/batches.hpp"
#include "train/model_digest.hpp"
#include "train/run.hpp"
#include "train/training_log.hpp"

namespace distlab::train {

void Run::print(const std::string& line) const {
  if (o.loop.quiet || !rank.roles.prints) return;
  const std::string text = "[RANK " + std::to_string(world.rank()) + "]: " + line + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kDigestTag = kEvalTagBase + 1000;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The data (training columns shared among replicas, the plan checked there
// are enough; evaluation splits whole), the executor over this rank's
// stages with the loss and its scales, the loss scaler.
void set_up(Run& run, const data::Corpus& corpus, const ParallelPlan& plan, const models::TransformerLmOptions& model,
            TrainResult& result) {
  const TrainerOptions& o = run.o;
  const int R = o.plan.layout.replicas;
  run.train_data = data::shard_for_replica(data::batchify(corpus.train, o.loop.batch_size), run.rank.groups.place.replica, R,
                                           data::ReplicaSplit::kColumns);
  run.valid_data = data::batchify(corpus.valid, o.loop.eval_batch_size);
  run.test_data = data::batchify(corpus.test, o.loop.eval_batch_size);
  result.parameters = models::count_parameters(model);
  if (run.world.rank() == 0) run.print(models::format_parameter_count(result.parameters));

  const int64_t chunks = plan.microbatches();
  pipeline::ExecutorOptions exec;
  exec.split_dim = 1;  // (S, N): microbatches are columns
  // This replica's share of the batch's columns (uneven when R does not divide the batch).
  exec.gradient_scale = double(R) * double(run.train_data.size(1)) / double(o.loop.batch_size);
  run.gradient_scale = exec.gradient_scale;
  // Each microbatch's auxiliary losses (experts) weigh as its loss does:
  // 1/m of the replica's step (exact when m divides the replica's columns).
  run.aux_loss_scale = exec.gradient_scale / double(chunks);
  run.rank.set_aux_loss_scale(run.aux_loss_scale);
  if (o.plan.memory.loss_scaling) run.scaler.emplace(o.plan.memory.loss_scaler);
  exec.loss = [&run](const at::Tensor& out, const at::Tensor& target) {
    return lm_loss(run.rank.context, out, target, run.batch_rows);
  };
  // Each held stage's strategy is armed before that stage's last backward.
  exec.before_backward = [&run](int stage, int, bool is_last) {
    if (is_last) run.rank.before_last_backward(stage);
  };
  std::vector<pipeline::StageModule> forwards;
  for (auto& dp : run.rank.data_parallel) {
    forwards.push_back(dp->stage());
    forwards.back().forward = in_precision(std::move(forwards.back().forward), run);
    forwards.back().splits_backward = !memory::recomputes_parameters(o.plan.memory.recompute);
  }
  const pipeline::Schedule schedule =
      pipeline::make_schedule(o.plan.pipeline.schedule, o.plan.layout.pipeline, static_cast<int>(chunks), o.plan.pipeline.stages_per_rank);
  run.executor = std::make_unique<pipeline::PipelineExecutor>(*run.rank.groups.pipeline, schedule, std::move(forwards), exec);
  if (run.world.rank() == 0 && chunks != o.plan.pipeline.microbatches)
    run.print("chunks " + std::to_string(chunks) + " (the smallest replica has " + std::to_string(chunks) + " columns)");
}

// The state to start from: fresh, or the newest checkpoint's when asked
// (or when the launcher restarted the job).
TrainerState starting_state(Run& run, TrainResult& result) {
  const TrainerOptions& o = run.o;
  TrainerState state;
  state.lr = o.loop.lr;
  state.best_valid_loss = std::numeric_limits<double>::infinity();
  if (!o.checkpoints.dir.empty()) {
    run.checkpoints.emplace(o.checkpoints.dir, o.plan.layout.pipeline, o.checkpoints.keep_last);
    // The unsplit model's state: any layout resumes from it, re-cut when
    // another stage count wrote it.
    run.checkpoints->accept_any_stage_count(true);
    const int restart = run.world.backend() == "threads" ? 0 : comm::world_from_env().restart_count;
    if (o.checkpoints.resume || restart > 0) result.resumed_from_step = resume(run, state);
  }
  if (run.scaler && state.loss_scale > 0) run.scaler->restore(state.loss_scale, state.loss_scale_clean_steps);
  run.rank.set_lr(state.lr);  // every stage's optimizer (ZeRO's steps the shard): StepLR's lr reaches whatever steps
  return state;
}

// The log line every log_interval batches and at the epoch's end.
struct BatchLog {
  Clock::time_point start = Clock::now();
  double loss = 0;
  int64_t batches = 0, tokens = 0;
};

// One epoch's batches from state.data_position on. Returns false when
// stopped by stop_after_steps.
bool train_batches(Run& run, TrainerState& state, TrainResult& result) {
  const TrainerOptions& o = run.o;
  const auto starts = data::batch_starts(run.train_data, o.loop.bptt, o.loop.batches_per_epoch > 0 ? o.loop.batches_per_epoch : -1);
  const int64_t batches = static_cast<int64_t>(starts.size());
  BatchLog log;
  for (; state.data_position < batches; ++state.data_position) {
    const auto step_start = Clock::now();
    const auto [input, target] =
        lm_batch(run.train_data, starts[static_cast<size_t>(state.data_position)], o.loop.bptt, run.world.device());
    const pipeline::StepResult step = train_step(run, input, target, state.step + 1, result);
    result.step_seconds.push_back(seconds_since(step_start));
    for (auto& stage : run.rank.stages) stage->record_expert_counts(run.world.recorder(), run.world.rank());
    ++state.step;
    log.tokens += input.numel() * o.plan.layout.replicas;  // the whole job's tokens
    if (step.has_loss) {
      result.step_losses.push_back(step.loss);
      log.loss += step.loss;
    }
    const bool epoch_end = state.data_position + 1 == batches;
    if (++log.batches == o.loop.log_interval || epoch_end) {
      const double elapsed = seconds_since(log.start);
      if (run.rank.last)
        run.print(format_batch_line(state.epoch, state.data_position + 1, batches, state.lr,
                                    elapsed * 1000 / double(log.batches), log.loss / double(log.batches),
                                    double(log.tokens) / elapsed));
      log = BatchLog{};
    }
    if (epoch_end) continue;  // its checkpoint and after_step come after the evaluation
    if (o.checkpoints.every > 0 && state.step % o.checkpoints.every == 0) {
      TrainerState saved = state;
      ++saved.data_position;
      save(run, saved);
    }
    if (o.loop.after_step) o.loop.after_step(state.step);
    if (state.step == o.loop.stop_after_steps) return false;
  }
  return true;
}

// The epochs from `state` on: batches, evaluation, the best model, StepLR,
// a checkpoint. Returns false when stopped by stop_after_steps.
bool train_epochs(Run& run, TrainerState& state, TrainResult& result) {
  const TrainerOptions& o = run.o;
  for (; state.epoch <= o.loop.epochs; ++state.epoch, state.data_position = 0) {
    const auto epoch_start = Clock::now();
    if (!train_batches(run, state, result)) return false;
    const double valid_loss = evaluate(run, run.valid_data);
    result.valid_losses.push_back(valid_loss);
    if (run.rank.last) {
      run.print(rule('-'));
      run.print(format_epoch_line(state.epoch, seconds_since(epoch_start), valid_loss));
      run.print(rule('-'));
    }
    if (valid_loss < state.best_valid_loss) {
      state.best_valid_loss = valid_loss;
      state.best.clear();
      for (const auto& [name, tensor] : run.rank.whole_state()) state.best[name] = tensor.detach().cpu().clone();
    }
    state.lr *= o.loop.gamma;  // StepLR(step_size 1, gamma)
    run.rank.set_lr(state.lr);
    TrainerState saved = state;
    ++saved.epoch;
    saved.data_position = 0;
    save(run, saved);
    if (o.loop.after_step) o.loop.after_step(state.step);
    if (state.step == o.loop.stop_after_steps && state.epoch < o.loop.epochs) {
      ++state.epoch;
      return false;
    }
  }
  return true;
}

// The final parameters' digest (and state), then, unless interrupted, the
// best model's test loss.
void finish(Run& run, const TrainerState& state, TrainResult& result) {
  result.steps = state.step;
  result.best_valid_loss = state.best_valid_loss;
  for (auto& dp : run.rank.data_parallel) result.data_parallel.push_back(dp->stats());
  const auto parameters = run.rank.whole_state(/*parameters_only=*/true);
  result.digest = model_digest(*run.rank.groups.pipeline, parameters, kDigestTag);
  if (run.o.loop.keep_final_state)
    for (const auto& [name, tensor] : parameters) result.final_state[name] = tensor.detach().cpu().clone();
  if (result.interrupted) {
    if (run.rank.first && run.rank.roles.speaks_for_stage) run.print("stopped after step " + std::to_string(state.step));
    return;
  }
  if (!state.best.empty()) run.rank.load_state(state.best);
  result.test_loss = evaluate(run, run.test_data);
  if (run.rank.last) {
    run.print(rule('='));
    run.print(format_test_line(result.test_loss));
    run.print(rule('='));
  }
  if (run.world.rank() == 0)
    run.print("final parameters digest " + result.digest + " (" + run.o.plan.layout.text() + ", " +
              std::to_string(result.steps) + " steps)");
}

TrainResult train_on_layout(comm::Communicator& world, const data::Corpus& corpus, const TrainerOptions& o,
                            const ParallelPlan& plan) {
  memory::check_precision(o.plan.memory.precision, world.device().type());
  const models::TransformerLmOptions model = model_options(o, static_cast<int64_t>(corpus.vocab.size()));
  Run run{world, o, build_rank(plan, world, model, o.loop.seed, o.loop.lr)};
  TrainResult result;
  result.layout = o.plan.layout;
  result.place = run.rank.groups.place;
  set_up(run, corpus, plan, model, result);
  TrainerState state = starting_state(run, result);
  result.interrupted = !train_epochs(run, state, result);
  finish(run, state, result);
  return result;
}

}  // namespace
int default_stages_per_rank(pipeline::ScheduleKind kind) { return pipeline::stages_per_rank_for(kind, 2); }

models::TransformerLmOptions model_options(const TrainerOptions& o, int64_t vocab_size) {
  models::TransformerLmOptions model = models::transformer_lm_preset(o.model.preset, vocab_size);
  model.causal = o.model.causal;
  if (o.model.dropout >= 0) model.dropout = o.model.dropout;
  if (o.model.layers > 0) model.nlayers = o.model.layers;
  if (o.model.heads > 0) {
    if (model.emsize % o.model.heads != 0)
      throw std::invalid_argument("--heads " + std::to_string(o.model.heads) + " does not divide the " + o.model.preset +
                                  " preset's width d = " + std::to_string(model.emsize));
    model.nhead = o.model.heads;
  }
  model.moe = o.model.moe;
  model.recompute = o.plan.memory.recompute;
  return model;
}

FittedLayout layout_for(int world_size, const TrainerOptions& options, int64_t vocab_size) {
  if (!options.checkpoints.elastic) return {options.plan.layout, "the layout asked for: " + options.plan.layout.text()};
  const models::TransformerLmOptions model = model_options(options, vocab_size);
  // Each pipeline rank holds stages_per_rank pieces of at least a layer.
  return fit_layout(world_size, options.plan.layout,
                    static_cast<int>(model.nlayers / std::max(1, options.plan.pipeline.stages_per_rank)));
}

ParallelPlan plan_for(const TrainerOptions& o, int64_t vocab_size) {
  return ParallelPlan(o.plan, model_facts(model_options(o, vocab_size), o.loop.batch_size));
}

TrainResult train(comm::Communicator& world, const data::Corpus& corpus, const TrainerOptions& options) {
  const int64_t vocab = static_cast<int64_t>(corpus.vocab.size());
  TrainerOptions fitted = options;
  const FittedLayout layout = layout_for(world.size(), options, vocab);
  fitted.plan.layout = layout.layout;
  const ParallelPlan plan = plan_for(fitted, vocab);
  try {
    plan.check();  // before any collective: every rank fails alike
    const std::string refused = world.shares_engine_thread() ? plan.refusal_on_a_shared_engine_thread() : "";
    if (!refused.empty()) throw std::invalid_argument(refused);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(world.self() + ": " + e.what());
  }
  if (world.rank() == 0 && !options.loop.quiet && fitted.plan.layout.text() != options.plan.layout.text()) {
    const std::string line = "[RANK 0]: elastic: " + layout.reason + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  }
  return train_on_layout(world, corpus, fitted, plan);
}

}  // namespace distlab::train
