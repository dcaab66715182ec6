// The header a shaped point-to-point message travels behind
// (comm/shaped_p2p.hpp): ten int64 words from a peer, read into a tensor
// to receive the data into. Anything but a header of a real dtype and
// at most 8 sizes, none negative and the whole not overflowing, is refused
// with a std::runtime_error. Made on the meta device: checked as the
// receiver checks it, without allocating what a hostile header asks for.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "comm/shaped_p2p.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using distlab::comm::kShapeHeaderLength;
  at::Tensor header = at::zeros({kShapeHeaderLength}, at::kLong);
  std::memcpy(header.data_ptr<int64_t>(), data, std::min<size_t>(size, kShapeHeaderLength * sizeof(int64_t)));
  try {
    const at::Tensor made = distlab::comm::empty_from_shape_header(header, at::Device(at::kMeta));
    // What a sender of that tensor would have put in its header.
    const at::Tensor back = distlab::comm::shape_header(made, at::Device(at::kCPU), "fuzz");
    const int64_t ndim = header[1].item<int64_t>();
    if (!at::equal(back.slice(0, 0, 2 + ndim), header.slice(0, 0, 2 + ndim))) {
      std::fprintf(stderr, "shape_header_fuzz: a header read and written again differs\n");
      std::abort();
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
