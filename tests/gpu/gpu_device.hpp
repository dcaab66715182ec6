// Where the GPU suite's tensors go. Each test runs its work twice, on the
// CPU and on this device, and compares: the CPU is the reference.
//
//   a GPU here                      cuda (rank r of a thread job takes GPU r % count)
//   DISTLAB_GPU_TESTS_ON_CPU=1      cpu: both sides on the CPU, so that every
//                                   comparison runs (against itself) and a test
//                                   broken in itself is found before a GPU is
//                                   lent (scripts/gpu_check.sh --cpu)
//   neither                         the test skips, saying so
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <ATen/Context.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace distlab::gpu_tests {

inline bool on_cpu_by_request() {
  const char* v = std::getenv("DISTLAB_GPU_TESTS_ON_CPU");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// "cuda", "cpu" (asked for), or "" (no GPU: skip).
inline std::string device_under_test() {
  if (torch::cuda::is_available()) return "cuda";
  return on_cpu_by_request() ? "cpu" : "";
}

inline c10::DeviceType device_type_under_test() {
  return device_under_test() == "cuda" ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
}

// Bit for bit on a GPU needs its kernels deterministic: cuBLAS with a fixed
// workspace (read at its first use in the process), and no atomics in the
// backward (LibTorch's deterministic mode).
inline void make_kernels_deterministic() {
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
}

}  // namespace distlab::gpu_tests

// The first line of every GPU test: skips without a device to test.
#define DISTLAB_GPU_TEST_DEVICE()                                                                   \
  do {                                                                                              \
    if (::distlab::gpu_tests::device_under_test().empty())                                          \
      GTEST_SKIP() << "no CUDA device on this machine (DISTLAB_GPU_TESTS_ON_CPU=1 runs both sides " \
                      "on the CPU)";                                                                \
  } while (0)
