#include "train/trainer_state.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

namespace distlab::train {

checkpoint::CheckpointPart to_part(const std::map<std::string, at::Tensor>& model, const TrainerState& state,
                       const std::string& written_by) {
  checkpoint::CheckpointPart part;
  for (const auto& [name, tensor] : model) part.model[name] = tensor.detach().cpu();
  for (const auto& [name, tensor] : state.best) part.tensors[kBestPrefix + name] = tensor.cpu();
  {
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(cpu.mutex());
    part.tensors["rng/cpu"] = cpu.get_state();
  }
  part.ints = {{"epoch", state.epoch}, {"data_position", state.data_position}, {"step", state.step}};
  part.reals = {{"scheduler/lr", state.lr}, {"optimizer/lr", state.lr}, {"best_valid_loss", state.best_valid_loss}};
  if (state.loss_scale > 0) {
    part.reals["loss_scale"] = state.loss_scale;
    part.ints["loss_scale_clean_steps"] = state.loss_scale_clean_steps;
  }
  part.texts = {{"written_by", written_by}};
  return part;
}

std::map<std::string, at::Tensor> from_part(const checkpoint::CheckpointPart& part, TrainerState& state) {
  state.epoch = part.ints.at("epoch");
  state.data_position = part.ints.at("data_position");
  state.step = part.ints.at("step");
  state.lr = part.reals.at("scheduler/lr");
  state.best_valid_loss = part.reals.at("best_valid_loss");
  const auto scale = part.reals.find("loss_scale");
  state.loss_scale = scale != part.reals.end() ? scale->second : 0;
  state.loss_scale_clean_steps = state.loss_scale > 0 ? part.ints.at("loss_scale_clean_steps") : 0;
  state.best.clear();
  for (const auto& [name, tensor] : part.tensors)
    if (name.rfind(kBestPrefix, 0) == 0) state.best[name.substr(kBestPrefix.size())] = tensor;
  if (auto rng = part.tensors.find("rng/cpu"); rng != part.tensors.end()) {
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu.set_state(rng->second);
  }
  return part.model;
}

}  // namespace distlab::train
