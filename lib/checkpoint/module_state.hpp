// Between a torch::nn::Module and a checkpoint's model part: parameters and
// buffers by full name, as Python's state_dict() names them ("fc1.weight",
// "bn.running_mean"), and a digest that says whether two models are equal
// bit for bit.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <map>
#include <string>

namespace distlab::checkpoint {

// Parameters, then buffers, by full name with `prefix` in front (a pipeline
// stage built from part of a model passes the names it has in the whole
// model). The tensors share the module's storage: clone to keep a copy.
std::map<std::string, at::Tensor> named_state(const torch::nn::Module& module, const std::string& prefix = "");

// Copies `saved` into the module's parameters and buffers, in place and
// without recording gradients. Every name of the module must be in `saved`
// with the same shape and dtype, and `saved` must have no other names:
// throws CheckpointError listing the missing, unexpected or mismatched ones.
void load_named_state(torch::nn::Module& module, const std::map<std::string, at::Tensor>& saved,
                      const std::string& prefix = "");

// The check load_named_state() makes, on its own: every name of `expected`
// in `saved` with the same shape and dtype, and no other names (a model held
// some other way than one module, e.g. cut across a tensor group, passes
// tensors of the shapes it would load, on the meta device). Throws
// CheckpointError listing the missing, unexpected or mismatched names.
void check_state_fits(const std::map<std::string, at::Tensor>& expected, const std::map<std::string, at::Tensor>& saved);

// CRC-32 over every tensor in name order: its name, dtype, shape and bytes
// (on CPU, contiguous). Equal digests: bit-equal tensors, with the odds of
// a 32-bit checksum. "0x1a2b3c4d".
std::string state_digest(const std::map<std::string, at::Tensor>& tensors);

}  // namespace distlab::checkpoint
