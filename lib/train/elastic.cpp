#include "train/elastic.hpp"

#include <algorithm>
#include <stdexcept>

#include "train/trainer_state.hpp"

namespace distlab::train {

FittedLayout fit_layout(int world_size, const Layout& wanted, int max_stages) {
  if (world_size < 1) throw std::invalid_argument("fit_layout: a world of " + std::to_string(world_size) + " ranks");
  const std::string world = std::to_string(world_size) + " rank(s)";
  // Kept: the stages' layers are cut T ways and the sequences split C ways whatever the world.
  const int T = std::max(1, wanted.tensor), C = std::max(1, wanted.context);
  const int group = T * C;
  if (world_size % group != 0)
    throw std::invalid_argument("elastic: " + world + " do not make " +
                                (C == 1 ? "tensor groups of " : "context x tensor groups of ") +
                                std::to_string(group) + "; the " + (C == 1 ? "tensor size is" : "context and tensor sizes are") +
                                " kept, so use a multiple of " + std::to_string(group) + " ranks");
  const int cells = world_size / group;  // ranks, or whole groups, to lay out as stages x replicas
  const std::string units = group == 1 ? std::to_string(cells) + " ranks"
                            : C == 1   ? std::to_string(cells) + " tensor groups"
                                       : std::to_string(cells) + " context x tensor groups";
  const int most = std::max(1, std::min(wanted.pipeline, max_stages));
  int stages = most;
  while (cells % stages != 0) --stages;  // 1 always divides
  Layout layout{stages, cells / stages, T};
  layout.context = C;
  FittedLayout fitted{layout, "", ""};
  if (fitted.layout.pipeline == wanted.pipeline && fitted.layout.replicas == wanted.replicas)
    fitted.why = "as asked";
  else if (stages == wanted.pipeline)
    fitted.why = "the " + std::to_string(stages) + " stages kept, the replicas follow the world";
  else if (stages == most)  // the world would split, the model does not: it has fewer layers
    fitted.why = "the model cuts into at most " + std::to_string(most) + " stages: it is re-cut";
  else
    fitted.why = units + " do not split into " + std::to_string(most) + " stages; " + std::to_string(stages) +
                 (stages == 1 ? " stage does" : " stages do") + ": the model is re-cut";
  fitted.reason = fitted.why == "as asked" ? fitted.layout.text() + ", as asked"
                                           : fitted.layout.text() + " on " + world + ": " + fitted.why +
                                                 " (asked " + wanted.text() + ")";
  return fitted;
}

checkpoint::CheckpointPart recut(const std::vector<checkpoint::CheckpointPart>& parts, const std::set<std::string>& names, int rng_from) {
  if (parts.empty()) throw checkpoint::CheckpointError("checkpoint: no parts to re-cut");
  checkpoint::CheckpointPart out;
  out.ints = parts.front().ints;
  out.reals = parts.front().reals;
  out.texts = parts.front().texts;
  const checkpoint::CheckpointPart& rng_part = parts.at(rng_from >= 0 && rng_from < static_cast<int>(parts.size()) ? rng_from : 0);
  if (auto rng = rng_part.tensors.find("rng/cpu"); rng != rng_part.tensors.end()) out.tensors["rng/cpu"] = rng->second;
  bool has_best = false;
  for (const checkpoint::CheckpointPart& part : parts) {
    for (const auto& [name, tensor] : part.model)
      if (names.count(name)) out.model[name] = tensor;
    for (const auto& [key, tensor] : part.tensors) {
      if (key.rfind(kBestPrefix, 0) != 0) continue;
      has_best = true;
      if (names.count(key.substr(kBestPrefix.size()))) out.tensors[key] = tensor;
    }
  }
  for (const std::string& name : names) {
    if (!out.model.count(name))
      throw checkpoint::CheckpointError("checkpoint: no part of the " + std::to_string(parts.size()) + "-stage checkpoint holds '" +
                            name + "' (written by another model?)");
    if (has_best && !out.tensors.count(kBestPrefix + name))
      throw checkpoint::CheckpointError("checkpoint: the best model saved with it lacks '" + name + "'");
  }
  return out;
}

}  // namespace distlab::train
