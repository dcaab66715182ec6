// Tensors whose shape the receiver does not know (comm/shaped_p2p.hpp):
// every dtype and rank of shape arrives as sent, bytes arrive as text, and
// what cannot travel is refused with the sender named.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "comm/shaped_p2p.hpp"
#include "comm/threads_backend.hpp"

namespace distlab::comm {
namespace {

TEST(ShapedP2p, TheReceiverGetsTheSendersShapeAndDtype) {
  const std::vector<at::Tensor> sent = {
      torch::tensor(3.5),                                          // 0 dimensions
      torch::arange(0, 7, torch::kInt32),                          // 1
      torch::randn({2, 3, 4}, torch::kFloat64),                    // 3
      torch::ones({1, 2, 1, 2, 1, 2, 1, 2}, torch::kBFloat16),     // 8, the most that travel
      torch::randn({4, 6}).t(),                                    // not contiguous
      torch::empty({0, 5}, torch::kFloat16),                       // no elements
  };
  run_thread_ranks(2, [&](Communicator& comm) {
    for (size_t i = 0; i < sent.size(); ++i) {
      const int tag = 10 * static_cast<int>(i);
      if (comm.rank() == 0) {
        send_with_shape(comm, sent[i], 1, tag);
      } else {
        const at::Tensor got = recv_with_shape(comm, 0, tag);
        EXPECT_EQ(got.sizes(), sent[i].sizes()) << "tensor #" << i;
        EXPECT_EQ(got.scalar_type(), sent[i].scalar_type()) << "tensor #" << i;
        EXPECT_TRUE(torch::equal(got, sent[i])) << "tensor #" << i;
      }
    }
  });
}

TEST(ShapedP2p, BytesArriveAsTheyWereSent) {
  const std::string text = std::string("a digest line\n") + '\0' + "and a zero byte";
  run_thread_ranks(2, [&](Communicator& comm) {
    if (comm.rank() == 1) send_bytes(comm, text, 0, 4);
    if (comm.rank() == 0) EXPECT_EQ(recv_bytes(comm, 1, 4), text);
    if (comm.rank() == 1) send_bytes(comm, "", 0, 6);
    if (comm.rank() == 0) EXPECT_EQ(recv_bytes(comm, 1, 6), "");
  });
}

TEST(ShapedP2p, NineDimensionsAreRefusedNamingTheSender) {
  const at::Tensor nine = torch::zeros({1, 1, 1, 1, 1, 1, 1, 1, 1});
  try {
    shape_header(nine, at::kCPU, "rank 3");
    FAIL() << "a 9-dimensional tensor was given a header";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3: a tensor of 9 dimensions; at most 8"), std::string::npos)
        << e.what();
  }
}

TEST(ShapedP2p, AHeaderThatIsNotOneIsRefused) {
  at::Tensor header = shape_header(torch::zeros({2, 2}), at::kCPU, "rank 0");
  EXPECT_EQ(empty_from_shape_header(header, at::kCPU).sizes(), (std::vector<int64_t>{2, 2}));
  header[1] = 9;
  EXPECT_THROW(empty_from_shape_header(header, at::kCPU), std::runtime_error);
  header[1] = -1;
  EXPECT_THROW(empty_from_shape_header(header, at::kCPU), std::runtime_error);
}

}  // namespace
}  // namespace distlab::comm
