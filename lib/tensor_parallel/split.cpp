#include "tensor_parallel/split.hpp"

#include <stdexcept>

namespace distlab::tensor_parallel {

std::string sizes_that_divide(int64_t size) {
  std::string out;
  int listed = 0;
  for (int64_t d = 1; d <= size && listed < 12; ++d) {
    if (size % d != 0) continue;
    out += (out.empty() ? "" : ", ") + std::to_string(d);
    ++listed;
  }
  return out;
}

int64_t split_evenly(const std::string& what, int64_t size, int parts) {
  if (parts < 1) throw std::invalid_argument(what + ": a tensor group of " + std::to_string(parts) + " ranks");
  if (size % parts != 0)
    throw std::invalid_argument(what + " do not split among " + std::to_string(parts) +
                                " tensor ranks; tensor sizes that would: " + sizes_that_divide(size));
  return size / parts;
}

}  // namespace distlab::tensor_parallel
