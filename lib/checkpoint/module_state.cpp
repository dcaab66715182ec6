#include "checkpoint/module_state.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <set>
#include <sstream>

#include "checkpoint/checkpointer.hpp"
#include "checkpoint/crc32.hpp"

namespace distlab::checkpoint {
namespace {

std::string shape_of(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes() << " " << t.scalar_type();
  return out.str();
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < 8; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 8) text += ", ... (" + std::to_string(names.size()) + " in all)";
  return text;
}

}  // namespace

std::map<std::string, at::Tensor> named_state(const torch::nn::Module& module, const std::string& prefix) {
  std::map<std::string, at::Tensor> state;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) state[prefix + item.key()] = item.value();
  for (const auto& item : module.named_buffers(/*recurse=*/true)) state[prefix + item.key()] = item.value();
  return state;
}

void check_state_fits(const std::map<std::string, at::Tensor>& mine, const std::map<std::string, at::Tensor>& saved) {
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [name, tensor] : mine) {
    auto it = saved.find(name);
    if (it == saved.end())
      missing.push_back(name);
    else if (it->second.sizes() != tensor.sizes() || it->second.scalar_type() != tensor.scalar_type())
      mismatched.push_back(name + " (saved " + shape_of(it->second) + ", model " + shape_of(tensor) + ")");
  }
  for (const auto& item : saved)
    if (!mine.count(item.first)) unexpected.push_back(item.first);
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::string message = "checkpoint: the saved model does not fit this one:";
    if (!missing.empty()) message += " missing " + joined(missing) + ";";
    if (!unexpected.empty()) message += " unexpected " + joined(unexpected) + ";";
    if (!mismatched.empty()) message += " different " + joined(mismatched) + ";";
    throw CheckpointError(message + " was it written by another model or layout?");
  }
}

void load_named_state(torch::nn::Module& module, const std::map<std::string, at::Tensor>& saved,
                      const std::string& prefix) {
  const auto mine = named_state(module, prefix);
  check_state_fits(mine, saved);
  c10::AutoGradMode no_grad(false);
  for (const auto& [name, tensor] : mine) {
    at::Tensor target = tensor;  // shares the module's storage
    target.copy_(saved.at(name));
  }
}

std::string state_digest(const std::map<std::string, at::Tensor>& tensors) {
  std::uint32_t crc = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::string header = name + "|" + shape_of(tensor) + "|";
    crc = crc32(header.data(), header.size(), crc);
    const at::Tensor bytes = tensor.detach().to(at::kCPU).contiguous();
    crc = crc32(bytes.data_ptr(), bytes.numel() * bytes.element_size(), crc);
  }
  return crc32_hex(crc);
}

}  // namespace distlab::checkpoint
