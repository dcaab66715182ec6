// Giving a tensor's memory back while keeping its storage, as FSDP does.
//
// ZeRO-3 frees a unit's gathered parameters after its forward, and gathers
// them again before its backward. Autograd saved the parameters (and views
// of them, like weight.t()) during forward: those saved tensors point at the
// same storage object. So the storage must stay the same object and only
// its bytes come and go: release() hands the bytes to the allocator and
// leaves a storage of size 0; reallocate() gives it fresh bytes, which the
// all-gather then fills, and every saved tensor reads the new values.
// Reading a released tensor is an error of the caller (its bytes are gone).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace distlab::zero {

// The bytes `t`'s storage holds now (0 once released).
int64_t storage_bytes(const at::Tensor& t);
void release_storage(const at::Tensor& t);
// Allocates `bytes` for `t`'s storage with the storage's own allocator.
// Throws if the storage still holds memory (release it first).
void reallocate_storage(const at::Tensor& t, int64_t bytes);

}  // namespace distlab::zero
