// Point-to-point messages whose shape the receiver does not know.
//
// A recv needs a tensor of the right dtype and size (communicator.hpp), but
// a pipeline stage's output shape is known only to the stage that made it.
// So such a tensor travels as two messages: a small int64 header of fixed
// length, then the data.
//
//   header: [dtype, ndim, size 0, ..., size ndim-1, 0 ...]   (kShapeHeaderLength)
//
// The pieces are public for callers that send without waiting (the pipeline
// executor posts both messages with isend under its own tags).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "comm/communicator.hpp"

namespace distlab::comm {

inline constexpr int64_t kShapeHeaderLength = 10;  // dtype, ndim, up to 8 sizes

// The header of a contiguous tensor, on `device`. Throws std::invalid_argument
// naming `who` for a tensor of more than 8 dimensions.
at::Tensor shape_header(const at::Tensor& data, const at::Device& device, const std::string& who);
// An empty header to receive into, on `device`.
at::Tensor empty_shape_header(const at::Device& device);
// A tensor of the header's dtype and shape, on `device`, to receive the data.
at::Tensor empty_from_shape_header(const at::Tensor& header, const at::Device& device);

// Blocking: the header under `tag`, the data under `tag + 1`.
void send_with_shape(Communicator& comm, const at::Tensor& tensor, int peer, int tag);
at::Tensor recv_with_shape(Communicator& comm, int peer, int tag);

// Bytes (e.g. text) between two ranks, as a uint8 tensor with its shape.
void send_bytes(Communicator& comm, const std::string& bytes, int peer, int tag);
std::string recv_bytes(Communicator& comm, int peer, int tag);

}  // namespace distlab::comm
