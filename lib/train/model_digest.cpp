#include "train/model_digest.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "checkpoint/crc32.hpp"
#include "comm/shaped_p2p.hpp"
#include "train/pipeline_forward.hpp"

namespace distlab::train {

std::string tensor_lines(const std::map<std::string, at::Tensor>& tensors) {
  std::string text;
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor t = tensor.detach().cpu().contiguous();
    std::ostringstream line;
    line << name << ' ' << t.scalar_type() << ' ' << t.sizes() << ' '
         << checkpoint::crc32_hex(checkpoint::crc32(t.data_ptr(), t.numel() * t.element_size())) << '\n';
    text += line.str();
  }
  return text;
}

namespace {

std::string digest_of_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line + "\n");
  std::sort(lines.begin(), lines.end());
  std::string joined;
  for (const auto& line : lines) joined += line;
  return checkpoint::crc32_hex(checkpoint::crc32(joined.data(), joined.size()));
}

}  // namespace

std::string model_digest_local(const std::map<std::string, at::Tensor>& tensors) {
  return digest_of_lines(tensor_lines(tensors));
}

std::string model_digest(comm::Communicator& pipeline, const std::map<std::string, at::Tensor>& stage_tensors,
                         int tag) {
  std::string lines = tensor_lines(stage_tensors);
  if (pipeline.rank() != 0) {
    comm::send_bytes(pipeline, lines, 0, tag);
    return comm::recv_bytes(pipeline, 0, tag + 2);
  }
  for (int stage = 1; stage < pipeline.size(); ++stage) lines += comm::recv_bytes(pipeline, stage, tag);
  const std::string digest = digest_of_lines(lines);
  for (int stage = 1; stage < pipeline.size(); ++stage) comm::send_bytes(pipeline, digest, stage, tag + 2);
  return digest;
}

}  // namespace distlab::train
