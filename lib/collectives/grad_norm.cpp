#include "collectives/grad_norm.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace distlab::collectives {

namespace {

// Sum of squares in float64 on `device`: (1,). Each gradient is read
// kNormChunk elements at a time, so the float64 copy is at most one chunk
// (512 KB), not the largest gradient twice over (an embedding's V x d as
// float64, then its squares): the clip is not a rank's peak.
at::Tensor sum_of_squares(const std::vector<at::Tensor>& gradients, const at::Device& device) {
  at::Tensor total = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device));
  for (const auto& g : gradients) {
    const at::Tensor flat = g.reshape({-1});
    for (int64_t at = 0; at < flat.numel(); at += kNormChunk) {
      const at::Tensor chunk = flat.narrow(0, at, std::min(kNormChunk, flat.numel() - at)).to(at::kDouble);
      total += at::dot(chunk, chunk);
    }
  }
  return total;
}

void scale(const std::vector<at::Tensor>& gradients, double norm, double max_norm) {
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return;
  at::NoGradGuard no_grad;
  for (const auto& g : gradients) g.mul_(coef);
}

// Shares with the same groups as one, their gradients in the order given.
std::vector<NormShare> merged(const std::vector<NormShare>& shares) {
  std::vector<NormShare> out;
  for (const NormShare& share : shares) {
    auto it = out.begin();
    while (it != out.end() && it->summed_over != share.summed_over) ++it;
    if (it == out.end()) {
      out.push_back(share);
    } else {
      it->gradients.insert(it->gradients.end(), share.gradients.begin(), share.gradients.end());
    }
  }
  return out;
}

}  // namespace

double clip_grad_norm(const std::vector<NormShare>& shares, double max_norm, comm::Communicator* whole_model) {
  // A group's device (NCCL all-reduces there), else the gradients'.
  std::optional<at::Device> device;
  if (whole_model != nullptr) device = whole_model->device();
  for (const NormShare& share : shares)
    for (size_t i = 0; !device && i < share.summed_over.size(); ++i) device = share.summed_over[i]->device();
  for (const NormShare& share : shares)
    if (!device && !share.gradients.empty()) device = share.gradients.front().device();
  if (!device) device = at::Device(at::kCPU);
  const std::vector<NormShare> parts = merged(shares);
  at::Tensor total = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(*device));
  for (const NormShare& part : parts) {
    at::Tensor sum = sum_of_squares(part.gradients, *device);
    for (comm::Communicator* group : part.summed_over)
      if (group->size() > 1) group->native_all_reduce(sum);  // the pieces on the group's ranks
    total += sum;
  }
  if (whole_model != nullptr && whole_model->size() > 1) whole_model->native_all_reduce(total);  // every stage's
  const double norm = std::sqrt(total.cpu().item<double>());
  for (const NormShare& part : parts) scale(part.gradients, norm, max_norm);
  return norm;
}

}  // namespace distlab::collectives
