// What the trace shows of a tensor-parallel layer: on 2 thread ranks, each
// rank's "tensor-parallel layer forward" span on the compute lane holds the
// layer's two forward collectives, all-reduces named by their group
// ("all_reduce ring [tensor]"), and backward adds two more outside it: four
// per layer per step, as the layer's comment counts.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/nn/modules/transformerlayer.h>

#include "comm/threads_backend.hpp"
#include "support/recording.hpp"
#include "tensor_parallel/layer.hpp"

namespace distlab::tensor_parallel {
namespace {

TEST(TensorParallelTrace, LayerForwardHoldsItsTwoGroupAllReduces) {
  comm::CommOptions options;
  auto sink = test_support::record_into(options);
  torch::nn::TransformerEncoderLayer full(
      torch::nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.0));
  comm::run_thread_ranks(
      2,
      [&](comm::Communicator& world) {
        auto group = world.split(0, world.rank(), "tensor");
        ParallelEncoderLayer layer(*group, full);
        const at::Tensor x = at::ones({4, 2, 8}).requires_grad_(true);
        layer(x).sum().backward();
      },
      options);
  for (int rank = 0; rank < 2; ++rank) {
    const trace::Event* forward = nullptr;
    for (const auto& e : sink->events())
      if (e.rank == rank && e.name == "tensor-parallel layer forward") forward = &e;
    ASSERT_NE(forward, nullptr) << "rank " << rank;
    EXPECT_EQ(forward->lane, trace::kLaneCompute);
    int inside = 0, outside = 0;
    for (const auto& e : sink->events()) {
      // (world.split's own native all-reduce has no group: not the layer's)
      if (e.rank != rank || e.category != "collective" || e.arg("group") != "tensor") continue;
      EXPECT_EQ(e.name, "all_reduce ring [tensor]") << "rank " << rank;
      (e.begin_us >= forward->begin_us && e.end_us <= forward->end_us ? inside : outside) += 1;
    }
    EXPECT_EQ(inside, 2) << "rank " << rank << ": g after the attention and after the MLP";
    EXPECT_EQ(outside, 2) << "rank " << rank << ": f before each, in backward";
  }
}

}  // namespace
}  // namespace distlab::tensor_parallel
