#include "train/elastic.hpp"

#include <algorithm>
#include <stdexcept>

#include "train/trainer_state.hpp"

namespace distlab::train {

FittedLayout fit_layout(int world_size, const Layout& wanted, int max_stages) {
  if (world_size < 1) throw std::invalid_argument("fit_layout: a world of " + std::to_string(world_size) + " ranks");
  const int most = std::max(1, std::min(wanted.pipeline, max_stages));
  int stages = most;
  while (world_size % stages != 0) --stages;  // 1 always divides
  FittedLayout fitted{{stages, world_size / stages}, "", ""};
  const std::string world = std::to_string(world_size) + " rank(s)";
  if (fitted.layout.pipeline == wanted.pipeline && fitted.layout.replicas == wanted.replicas)
    fitted.why = "as asked";
  else if (stages == wanted.pipeline)
    fitted.why = "the " + std::to_string(stages) + " stages kept, the replicas follow the world";
  else if (stages == most)  // the world would split, the model does not: it has fewer layers
    fitted.why = "the model cuts into at most " + std::to_string(most) + " stages: it is re-cut";
  else
    fitted.why = std::to_string(world_size) + " ranks do not split into " + std::to_string(most) + " stages; " +
                 std::to_string(stages) + (stages == 1 ? " stage does" : " stages do") + ": the model is re-cut";
  fitted.reason = fitted.why == "as asked" ? fitted.layout.text() + ", as asked"
                                           : fitted.layout.text() + " on " + world + ": " + fitted.why +
                                                 " (asked " + wanted.text() + ")";
  return fitted;
}

CheckpointPart recut(const std::vector<CheckpointPart>& parts, const std::set<std::string>& names, int rng_from) {
  if (parts.empty()) throw CheckpointError("checkpoint: no parts to re-cut");
  CheckpointPart out;
  out.ints = parts.front().ints;
  out.reals = parts.front().reals;
  out.texts = parts.front().texts;
  const CheckpointPart& rng_part = parts.at(rng_from >= 0 && rng_from < static_cast<int>(parts.size()) ? rng_from : 0);
  if (auto rng = rng_part.tensors.find("rng/cpu"); rng != rng_part.tensors.end()) out.tensors["rng/cpu"] = rng->second;
  bool has_best = false;
  for (const CheckpointPart& part : parts) {
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
      throw CheckpointError("checkpoint: no part of the " + std::to_string(parts.size()) + "-stage checkpoint holds '" +
                            name + "' (written by another model?)");
    if (has_best && !out.tensors.count(kBestPrefix + name))
      throw CheckpointError("checkpoint: the best model saved with it lacks '" + name + "'");
  }
  return out;
}

}  // namespace distlab::train
