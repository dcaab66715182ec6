// One short digest of a model's parameters, whatever the layout it was
// trained in, so that two runs (interrupted or not, 2 x 2 or 1 x 1) can be
// compared by reading one line.
//
// Each tensor becomes a line "name dtype shape crc32(bytes)"; the lines of
// all stages are sorted by name and joined; the digest is the CRC-32 of that
// text. A pipeline's stages send their lines to stage 0, which sends the
// digest back.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "comm/communicator.hpp"

namespace distlab::train {

// "name dtype [sizes] 0x1a2b3c4d\n" for each tensor, in name order.
std::string tensor_lines(const std::map<std::string, at::Tensor>& tensors);

// The digest of a whole model held by one process: "0x1a2b3c4d".
std::string model_digest_local(const std::map<std::string, at::Tensor>& tensors);

// The digest of the model whose stages the ranks of `pipeline` hold, each
// passing its own stage's tensors by full name. Same value on every rank,
// equal to model_digest_local of the whole model.
std::string model_digest(comm::Communicator& pipeline, const std::map<std::string, at::Tensor>& stage_tensors,
                         int tag);

}  // namespace distlab::train
