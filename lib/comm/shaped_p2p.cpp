#include "comm/shaped_p2p.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <vector>

#include "comm/message_text.hpp"

namespace distlab::comm {

at::Tensor shape_header(const at::Tensor& data, const at::Device& device, const std::string& who) {
  if (data.dim() > kShapeHeaderLength - 2)
    throw std::invalid_argument(who + ": a tensor of " + std::to_string(data.dim()) + " dimensions; at most " +
                                std::to_string(kShapeHeaderLength - 2) + " travel with their shape");
  at::Tensor header = at::zeros({kShapeHeaderLength}, at::kLong);
  auto h = header.accessor<int64_t, 1>();
  h[0] = static_cast<int64_t>(data.scalar_type());
  h[1] = data.dim();
  for (int64_t d = 0; d < data.dim(); ++d) h[2 + d] = data.size(d);
  return header.to(device);
}

at::Tensor empty_shape_header(const at::Device& device) {
  return at::empty({kShapeHeaderLength}, at::TensorOptions().dtype(at::kLong).device(device));
}

at::Tensor empty_from_shape_header(const at::Tensor& header, const at::Device& device) {
  const at::Tensor cpu = header.cpu();
  const auto h = cpu.accessor<int64_t, 1>();
  if (h[1] < 0 || h[1] > kShapeHeaderLength - 2)
    throw std::runtime_error("a shape header with " + std::to_string(h[1]) + " dimensions: not a shape header");
  // A peer's bytes (or a message under the wrong tag): every word checked
  // before it becomes a dtype or a size.
  const std::optional<at::ScalarType> kind = tensor_dtype(h[0]);
  if (!kind)
    throw std::runtime_error("a shape header with dtype number " + std::to_string(h[0]) + ": not a shape header");
  const at::ScalarType dtype = *kind;
  const std::vector<int64_t> sizes(h.data() + 2, h.data() + 2 + h[1]);
  int64_t bytes = static_cast<int64_t>(c10::elementSize(dtype));
  for (const int64_t size : sizes)
    if (size < 0 || __builtin_mul_overflow(bytes, size, &bytes))
      throw std::runtime_error("a shape header with sizes " + c10::str(at::IntArrayRef(sizes)) + ": not a shape header");
  return at::empty(sizes, at::TensorOptions().dtype(dtype).device(device));
}

void send_with_shape(Communicator& comm, const at::Tensor& tensor, int peer, int tag) {
  const at::Tensor data = tensor.contiguous();
  comm.send(shape_header(data, comm.device(), comm.self()), peer, tag);
  comm.send(data, peer, tag + 1);
}

at::Tensor recv_with_shape(Communicator& comm, int peer, int tag) {
  at::Tensor header = empty_shape_header(comm.device());
  comm.recv(header, peer, tag);
  at::Tensor data = empty_from_shape_header(header, comm.device());
  comm.recv(data, peer, tag + 1);
  return data;
}

void send_bytes(Communicator& comm, const std::string& bytes, int peer, int tag) {
  at::Tensor data = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::copy(bytes.begin(), bytes.end(), data.data_ptr<uint8_t>());
  send_with_shape(comm, data.to(comm.device()), peer, tag);
}

std::string recv_bytes(Communicator& comm, int peer, int tag) {
  const at::Tensor data = recv_with_shape(comm, peer, tag).cpu();
  const auto* p = data.data_ptr<uint8_t>();
  return std::string(p, p + data.numel());
}

}  // namespace distlab::comm
