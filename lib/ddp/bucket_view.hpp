// A gradient that lives in a bucket: DDP's gradient_as_bucket_view
// (reducer.hpp) and ZeRO-1's gradient buffers (zero/zero1.hpp) both make a
// parameter's .grad share the memory of its slot in a flat buffer, so that
// backward accumulates straight into the bucket and nothing is copied.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/strides.h>

namespace distlab::ddp {

// A contiguous tensor of shape `sizes` over the memory of `slot` (a range
// of a flat buffer, with as many elements). It is made with set_ over the
// buffer's storage, not as an autograd view of the buffer: an optimizer's
// zero_grad may detach_() it, which a view refuses.
inline at::Tensor bucket_view(const at::Tensor& slot, at::IntArrayRef sizes) {
  at::Tensor grad = at::empty({0}, slot.options());
  grad.set_(slot.storage(), slot.storage_offset(), sizes, c10::contiguous_strides(sizes));
  return grad;
}

}  // namespace distlab::ddp
