#include "collectives/calibrate.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "collectives/tags.hpp"

namespace distlab::collectives {
namespace {

// Median seconds of one round trip of `bytes` between ranks 0 and 1, seen
// from rank 0 (rank 1 only echoes; it returns 0).
double round_trip_seconds(comm::Communicator& comm, int64_t bytes, const CalibrationOptions& options) {
  at::Tensor buffer = at::zeros({bytes}, at::TensorOptions().dtype(at::kByte).device(options.device));
  std::vector<double> seconds;
  for (int i = 0; i < options.warmup + options.iterations; ++i) {
    if (comm.rank() == 0) {
      const auto start = std::chrono::steady_clock::now();
      comm.send(buffer, 1, kCalibrationTag);
      comm.recv(buffer, 1, kCalibrationTag);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      if (i >= options.warmup) seconds.push_back(took.count());
    } else {
      comm.recv(buffer, 0, kCalibrationTag);
      comm.send(buffer, 0, kCalibrationTag);
    }
  }
  if (seconds.empty()) return 0.0;
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

LinkParams calibrate(comm::Communicator& comm, const CalibrationOptions& options) {
  if (options.iterations < 1 || options.warmup < 0 || options.large_bytes < 2)
    throw std::invalid_argument("calibrate: need iterations >= 1, warmup >= 0 and large_bytes >= 2");
  if (comm.size() == 1) return {};
  // Rank 0's answer, sent to all: [alpha, beta] as float64 on the device.
  at::Tensor result = at::zeros({2}, at::TensorOptions().dtype(at::kDouble).device(options.device));
  if (comm.rank() < 2) {
    const double small = round_trip_seconds(comm, 1, options);
    const double large = round_trip_seconds(comm, options.large_bytes, options);
    if (comm.rank() == 0) {
      const double alpha = small / 2;
      // Noise can make the difference negative on a fast link; beta is then
      // at most the whole one-way time per byte.
      double beta = (large / 2 - alpha) / static_cast<double>(options.large_bytes - 1);
      if (beta <= 0) beta = large / 2 / static_cast<double>(options.large_bytes);
      result = at::tensor({alpha, beta}, at::TensorOptions().dtype(at::kDouble)).to(options.device);
    }
  }
  comm.native_broadcast(result, /*root=*/0);
  const at::Tensor on_cpu = result.cpu();
  return {on_cpu[0].item<double>(), on_cpu[1].item<double>()};
}

}  // namespace distlab::collectives
