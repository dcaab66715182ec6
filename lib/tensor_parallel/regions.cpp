#include "tensor_parallel/regions.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

#include "collectives/collectives.hpp"
#include "tensor_parallel/split.hpp"

namespace distlab::tensor_parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The communicator rides in the autograd context as its address: it lives as
// long as the group, which outlives every backward of the step.
void keep(AutogradContext* ctx, Communicator* comm) { ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm); }
Communicator& comm_of(AutogradContext* ctx) {
  return *reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
}

// The collectives, out of place (the input may be saved by another backward).
at::Tensor summed(Communicator& comm, const at::Tensor& x) {
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  collectives::all_reduce(comm, in, out, comm::ReduceOp::kSum);
  return out;
}

at::Tensor gathered(Communicator& comm, const at::Tensor& x) {
  const at::Tensor in = x.contiguous();
  std::vector<int64_t> sizes = in.sizes().vec();
  sizes.at(0) *= comm.size();
  at::Tensor out = at::empty(sizes, in.options());
  collectives::all_gather(comm, in, out);
  return out;
}

at::Tensor reduce_scattered(Communicator& comm, const at::Tensor& x) {
  const at::Tensor in = x.contiguous();
  std::vector<int64_t> sizes = in.sizes().vec();
  sizes.at(0) = split_evenly("sequence parallelism: " + std::to_string(sizes.at(0)) + " sequence rows", sizes.at(0),
                             comm.size());
  at::Tensor out = at::empty(sizes, in.options());
  collectives::reduce_scatter(comm, in, out, comm::ReduceOp::kSum);
  return out;
}

struct CopyToRegion : torch::autograd::Function<CopyToRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* comm) {
    keep(ctx, comm);
    return x;  // autograd returns it as a view with this function's backward
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {summed(comm_of(ctx), grad.at(0)), at::Tensor()};
  }
};

struct ReduceFromRegion : torch::autograd::Function<ReduceFromRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* comm) {
    keep(ctx, comm);
    return summed(*comm, x);
  }
  static variable_list backward(AutogradContext*, variable_list grad) { return {grad.at(0), at::Tensor()}; }
};

struct GatherFromSequenceRegion : torch::autograd::Function<GatherFromSequenceRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* comm) {
    keep(ctx, comm);
    return gathered(*comm, x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {reduce_scattered(comm_of(ctx), grad.at(0)), at::Tensor()};
  }
};

struct ReduceScatterToSequenceRegion : torch::autograd::Function<ReduceScatterToSequenceRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* comm) {
    keep(ctx, comm);
    return reduce_scattered(*comm, x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {gathered(comm_of(ctx), grad.at(0)), at::Tensor()};
  }
};

struct ScatterToSequenceRegion : torch::autograd::Function<ScatterToSequenceRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* comm) {
    keep(ctx, comm);
    return my_sequence_rows(*comm, x).clone();  // a tensor of its own, not a view of the whole
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {gathered(comm_of(ctx), grad.at(0)), at::Tensor()};
  }
};

}  // namespace

at::Tensor copy_to_region(Communicator& comm, const at::Tensor& x) {
  return comm.size() == 1 ? x : CopyToRegion::apply(x, &comm);
}
at::Tensor reduce_from_region(Communicator& comm, const at::Tensor& x) {
  return comm.size() == 1 ? x : ReduceFromRegion::apply(x, &comm);
}
at::Tensor gather_from_sequence_region(Communicator& comm, const at::Tensor& x) {
  return comm.size() == 1 ? x : GatherFromSequenceRegion::apply(x, &comm);
}
at::Tensor reduce_scatter_to_sequence_region(Communicator& comm, const at::Tensor& x) {
  return comm.size() == 1 ? x : ReduceScatterToSequenceRegion::apply(x, &comm);
}
at::Tensor scatter_to_sequence_region(Communicator& comm, const at::Tensor& x) {
  return comm.size() == 1 ? x : ScatterToSequenceRegion::apply(x, &comm);
}

at::Tensor my_sequence_rows(const Communicator& comm, const at::Tensor& whole) {
  const int64_t rows = split_evenly("sequence parallelism: " + std::to_string(whole.size(0)) + " sequence rows",
                                    whole.size(0), comm.size());
  return whole.narrow(0, comm.rank() * rows, rows);
}

}  // namespace distlab::tensor_parallel
