// The nccl backend where it cannot run: a clear error, never a crash. (On a
// machine with GPUs, comm_gloo_worker --backend nccl under distlab-run runs
// the same checks as the gloo job; see docs/gpu.md.)
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "comm/nccl_backend.hpp"
#include "launcher_process.hpp"
#include "support/free_port.hpp"

namespace distlab::comm {
namespace {

TEST(NcclBackend, WithoutAGpuSaysSoAndPointsElsewhere) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  WorldInfo world;
  world.master_port = test_support::free_port();
  try {
    make_nccl_communicator(world, CommOptions{});
    FAIL() << "expected a SetupError";
  } catch (const SetupError& e) {
    const std::string message = e.what();
    if (nccl_compiled()) {
      EXPECT_NE(message.find("the nccl backend needs a GPU"), std::string::npos) << message;
    } else {
      EXPECT_NE(message.find("no NCCL backend"), std::string::npos) << message;
    }
    EXPECT_NE(message.find("--backend gloo or threads"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace distlab::comm
