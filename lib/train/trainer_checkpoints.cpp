// The trainer's checkpoints: every epoch (and every N steps), written by
// the ranks whose role it is, the unsplit model's state whatever the
// layout; resumed by every rank from the newest complete one, re-cut when
// another layout wrote it (elastic.hpp).
#include <ATen/ATen.h>

#include <set>

#include "train/elastic.hpp"
#include "train/run.hpp"

namespace distlab::train {

namespace {

// This rank's part of the checkpoint of `step`: as written, or re-cut from
// every part when another stage count wrote it (elastic.hpp) or the same
// ranks held other stages (another number of stages per rank).
checkpoint::CheckpointPart load_part(Run& run, int64_t step) {
  const int stage = run.rank.groups.place.stage;
  const int written = run.checkpoints->stages_of(step).value_or(run.o.plan.layout.pipeline);
  const std::set<std::string> names = run.rank.state_names();
  if (written == run.o.plan.layout.pipeline) {
    checkpoint::CheckpointPart part = run.checkpoints->load(step, stage);
    std::set<std::string> held;
    for (const auto& item : part.model) held.insert(item.first);
    if (held == names) return part;
  }
  std::vector<checkpoint::CheckpointPart> parts;
  for (int s = 0; s < written; ++s) parts.push_back(run.checkpoints->load(step, s));
  if (run.world.rank() == 0 && written != run.o.plan.layout.pipeline)
    run.print("re-cutting the " + std::to_string(written) + "-stage checkpoint of step " + std::to_string(step) +
              " into " + std::to_string(run.o.plan.layout.pipeline) + " stage(s)");
  else if (run.world.rank() == 0)
    run.print("re-cutting the checkpoint of step " + std::to_string(step) + ": the ranks hold other layers now (" +
              std::to_string(run.rank.stages.size()) + " stage(s) per rank, placed by " +
              pipeline::kind_name(run.o.plan.pipeline.schedule) + ")");
  return recut(parts, names, stage);
}

}  // namespace

void save(Run& run, const TrainerState& state) {
  if (!run.checkpoints) return;
  const auto model = run.rank.checkpoint_state();
  if (!model) return;
  TrainerState with_scale = state;
  if (run.scaler) {
    with_scale.loss_scale = run.scaler->scale();
    with_scale.loss_scale_clean_steps = run.scaler->growth_tracker();
  }
  checkpoint::CheckpointPart part = to_part(*model, with_scale, "rank " + std::to_string(run.world.rank()));
  part.texts["layout"] = run.o.plan.layout.text();
  const int stage = run.rank.groups.place.stage;
  const std::string folder = run.checkpoints->save(state.step, stage, part);
  if (stage == 0)
    run.print("checkpoint " + folder + " (epoch " + std::to_string(state.epoch) + ", batch " +
              std::to_string(state.data_position) + ", step " + std::to_string(state.step) + ")");
}

// World rank 0 picks the newest complete checkpoint and tells everybody, so
// all ranks resume from the same one.
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
  run.rank.load_state(from_part(part, state));
  if (run.rank.roles.speaks_for_stage)
    run.print("resumed from " + run.checkpoints->folder(step) + ": stage " + std::to_string(run.rank.groups.place.stage) +
              ", epoch " + std::to_string(state.epoch) + ", batch " + std::to_string(state.data_position) +
              ", step " + std::to_string(state.step) + " (written by " + part.texts.at("written_by") +
              (part.texts.count("layout") ? " of " + part.texts.at("layout") : std::string()) + ")");
  return step;
}

}  // namespace distlab::train
