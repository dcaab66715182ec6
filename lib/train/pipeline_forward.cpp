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

LossSum forward_loss_sum(comm::Communicator& pipeline, const std::function<at::Tensor(const at::Tensor&)>& forward,
                         const at::Tensor& input, const at::Tensor& target, int tag) {
  at::NoGradGuard no_grad;
  const int stage = pipeline.rank(), last = pipeline.size() - 1;
  const at::Tensor x = stage == 0 ? input : recv_with_shape(pipeline, stage - 1, tag);
  const at::Tensor out = forward(x);
  if (stage < last) {
    send_with_shape(pipeline, out, stage + 1, tag);
    return {};
  }
  // out (S, N, V), target (S, N): aligned position by position.
  const at::Tensor logits = out.reshape({-1, out.size(-1)});
  const at::Tensor flat = target.reshape({-1}).to(logits.device());
  const double sum = at::cross_entropy_loss(logits, flat, /*weight=*/{}, at::Reduction::Sum).item<double>();
  return {sum, flat.numel()};
}

}  // namespace distlab::train
