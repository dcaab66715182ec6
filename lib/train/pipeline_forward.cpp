#include "train/pipeline_forward.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

namespace distlab::train {

namespace {
constexpr int64_t kHeaderLength = 10;  // dtype, ndim, up to 8 sizes
}

void send_with_shape(comm::Communicator& comm, const at::Tensor& tensor, int peer, int tag) {
  const at::Tensor data = tensor.contiguous();
  if (data.dim() > kHeaderLength - 2)
    throw std::invalid_argument(comm.self() + ": a tensor of " + std::to_string(data.dim()) +
                                " dimensions; at most 8 travel with their shape");
  at::Tensor header = at::zeros({kHeaderLength}, at::kLong);
  header[0] = static_cast<int64_t>(data.scalar_type());
  header[1] = data.dim();
  for (int64_t d = 0; d < data.dim(); ++d) header[2 + d] = data.size(d);
  comm.send(header.to(comm.device()), peer, tag);
  comm.send(data, peer, tag + 1);
}

at::Tensor recv_with_shape(comm::Communicator& comm, int peer, int tag) {
  at::Tensor header = at::empty({kHeaderLength}, at::TensorOptions().dtype(at::kLong).device(comm.device()));
  comm.recv(header, peer, tag);
  header = header.cpu();
  const auto h = header.accessor<int64_t, 1>();
  const std::vector<int64_t> sizes(h.data() + 2, h.data() + 2 + h[1]);
  at::Tensor data =
      at::empty(sizes, at::TensorOptions().dtype(static_cast<at::ScalarType>(h[0])).device(comm.device()));
  comm.recv(data, peer, tag + 1);
  return data;
}

void send_bytes(comm::Communicator& comm, const std::string& bytes, int peer, int tag) {
  at::Tensor data = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::copy(bytes.begin(), bytes.end(), data.data_ptr<uint8_t>());
  send_with_shape(comm, data.to(comm.device()), peer, tag);
}

std::string recv_bytes(comm::Communicator& comm, int peer, int tag) {
  const at::Tensor data = recv_with_shape(comm, peer, tag).cpu();
  const auto* p = data.data_ptr<uint8_t>();
  return std::string(p, p + data.numel());
}

LossSum forward_loss_sum(comm::Communicator& pipeline, const StageForward& forward, const at::Tensor& input,
                         const at::Tensor& target, int tag) {
  std::vector<int> rank_of_stage(static_cast<size_t>(pipeline.size()));
  for (int s = 0; s < pipeline.size(); ++s) rank_of_stage[static_cast<size_t>(s)] = s;
  return forward_loss_sum(pipeline, rank_of_stage, {{pipeline.rank(), forward}}, input, target, tag);
}

LossSum forward_loss_sum(comm::Communicator& pipeline, const std::vector<int>& rank_of_stage,
                         const std::map<int, StageForward>& forwards, const at::Tensor& input, const at::Tensor& target,
                         int tag) {
  at::NoGradGuard no_grad;
  const int me = pipeline.rank(), stages = static_cast<int>(rank_of_stage.size());
  const auto owner = [&](int s) { return rank_of_stage.at(static_cast<size_t>(s)); };
  at::Tensor out;  // the output of the last stage this rank ran
  for (int s = 0; s < stages; ++s) {
    if (owner(s) != me) continue;
    at::Tensor x = input;                                        // stage 0: the tokens
    if (s > 0 && owner(s - 1) != me) x = recv_with_shape(pipeline, owner(s - 1), tag + 2 * s);
    else if (s > 0) x = out;                                     // from this rank's previous stage, in memory
    out = forwards.at(s)(x);
    if (s + 1 < stages && owner(s + 1) != me) send_with_shape(pipeline, out, owner(s + 1), tag + 2 * (s + 1));
  }
  if (owner(stages - 1) != me) return {};
  // out (S, N, V), target (S, N): aligned position by position.
  const at::Tensor logits = out.reshape({-1, out.size(-1)});
  const at::Tensor flat = target.reshape({-1}).to(logits.device());
  const double sum = at::cross_entropy_loss(logits, flat, /*weight=*/{}, at::Reduction::Sum).item<double>();
  return {sum, flat.numel()};
}

}  // namespace distlab::train
