// The public calls: check the tensors, pick the plan (or the backend's own
// collective), run it on a flat view of the buffer.
#include "collectives/collectives.hpp"

#include <ATen/ATen.h>

#include <string>

#include "collectives/executor.hpp"
#include "collectives/tags.hpp"
#include "comm/flight_op.hpp"

namespace distlab::collectives {
namespace {

std::string who(const Communicator& comm) { return "rank " + std::to_string(comm.world_rank()) + ": "; }

void check_defined(const Communicator& comm, const char* call, const at::Tensor& tensor, const char* name) {
  if (!tensor.defined()) throw comm::CommError(who(comm) + call + ": " + name + " is an undefined tensor");
}

// Checks an out-of-place pair; `sized` ("input" or "output") must have
// `numel` elements.
void check_pair(const Communicator& comm, const char* call, const at::Tensor& input, const at::Tensor& output,
                const char* sized, int64_t numel) {
  check_defined(comm, call, input, "input");
  check_defined(comm, call, output, "output");
  if (input.scalar_type() != output.scalar_type() || input.device() != output.device())
    throw comm::CommError(who(comm) + call + ": input and output differ in dtype or device");
  const at::Tensor& checked = std::string(sized) == "input" ? input : output;
  if (checked.numel() != numel)
    throw comm::CommError(who(comm) + call + ": " + sized + " has " + std::to_string(checked.numel()) +
                          " elements, expected " + std::to_string(numel) + " (input " + std::to_string(input.numel()) +
                          ", output " + std::to_string(output.numel()) + ", world size " + std::to_string(comm.size()) +
                          ")");
}

// Runs body(flat) on a contiguous 1-D view of `tensor`; a non-contiguous
// tensor is worked on as a contiguous copy, then copied back.
template <typename Body>
void on_flat(at::Tensor& tensor, Body&& body) {
  at::Tensor work = tensor.is_contiguous() ? tensor : tensor.contiguous();
  at::Tensor flat = work.view({-1});
  body(flat);
  if (!work.is_same(tensor)) tensor.copy_(work);
}

// Runs a plan on `flat` inside one "collective" event (its steps nest in it).
void run(Communicator& comm, Collective collective, Algorithm algorithm, at::Tensor& flat, int root, ReduceOp op,
         int tag) {
  const Plan plan = plan_for(comm, collective, algorithm, flat, root);
  trace::Span span(comm.recorder(), comm.world_rank(), trace::kLaneComm, "collective", "collective");
  if (span.active()) {
    describe_call(span, comm, plan, flat, plan.count);
    span.arg("op", comm::to_string(op)).arg("root", root).arg("steps", plan.steps.size());
  }
  run_plan(comm, plan, flat, op, tag);
}

// Every in-place call has one shape: check, flatten, then the backend's own
// collective (native(flat)) or the plan.
template <typename Native>
void in_place(Communicator& comm, at::Tensor& tensor, Collective collective, Algorithm algorithm, int root,
              ReduceOp op, int tag, Native&& native) {
  check_defined(comm, to_string(collective), tensor, "tensor");
  check_collective_tag(tag);
  // One flight record for the call, in the caller's shape; the messages of
  // its plan, or the backend call, are part of it (comm/flight_op.hpp).
  const bool rooted = collective == Collective::kBroadcast || collective == Collective::kReduce;
  comm::FlightOp::collective(comm, to_string(collective), to_string(algorithm), tensor, rooted ? root : -1).run([&] {
    on_flat(tensor, [&](at::Tensor& flat) {
      if (algorithm == Algorithm::kNative)
        native(flat);
      else
        run(comm, collective, algorithm, flat, root, op, tag);
    });
  });
}

}  // namespace

Plan plan_for(const Communicator& comm, Collective collective, Algorithm algorithm, const at::Tensor& tensor,
              int root) {
  return make_plan(collective, algorithm, comm.size(), tensor.numel(), root, static_cast<int>(tensor.element_size()));
}

// ---------------------------------------------------------------- in place

void broadcast(Communicator& comm, at::Tensor& tensor, int root, Algorithm algorithm, int tag) {
  in_place(comm, tensor, Collective::kBroadcast, algorithm, root, ReduceOp::kSum, tag,
           [&](at::Tensor& flat) { comm.native_broadcast(flat, root); });
}

void reduce(Communicator& comm, at::Tensor& tensor, int root, ReduceOp op, Algorithm algorithm, int tag) {
  in_place(comm, tensor, Collective::kReduce, algorithm, root, op, tag,
           [&](at::Tensor& flat) { comm.native_reduce(flat, root, op); });
}

void all_reduce(Communicator& comm, at::Tensor& tensor, ReduceOp op, Algorithm algorithm, int tag) {
  in_place(comm, tensor, Collective::kAllReduce, algorithm, 0, op, tag,
           [&](at::Tensor& flat) { comm.native_all_reduce(flat, op); });
}

at::Tensor reduce_scatter(Communicator& comm, at::Tensor& tensor, ReduceOp op, Algorithm algorithm, int tag) {
  // The Communicator has no native reduce-scatter: the backend's all-reduce
  // computes every chunk, this rank's among them.
  in_place(comm, tensor, Collective::kReduceScatter, algorithm, 0, op, tag,
           [&](at::Tensor& flat) { comm.native_all_reduce(flat, op); });
  const Range mine = chunk_range(tensor.numel(), comm.size(), comm.rank());
  return tensor.reshape({-1}).narrow(0, mine.offset, mine.count);  // a view when tensor is contiguous
}

void all_gather(Communicator& comm, at::Tensor& tensor, Algorithm algorithm, int tag) {
  // No native all-gather either: every rank zeroes all but its own chunk and
  // the backend's all-reduce sums them (x + 0 is exactly x).
  in_place(comm, tensor, Collective::kAllGather, algorithm, 0, ReduceOp::kSum, tag, [&](at::Tensor& flat) {
    const Range mine = chunk_range(flat.numel(), comm.size(), comm.rank());
    flat.narrow(0, 0, mine.offset).zero_();
    flat.narrow(0, mine.offset + mine.count, flat.numel() - mine.offset - mine.count).zero_();
    comm.native_all_reduce(flat, ReduceOp::kSum);
  });
}

// ------------------------------------------------------------ out of place

void broadcast(Communicator& comm, const at::Tensor& input, at::Tensor& output, int root, Algorithm algorithm,
               int tag) {
  check_pair(comm, "broadcast", input, output, "output", input.numel());
  if (comm.rank() == root) output.copy_(input.reshape(output.sizes()));
  broadcast(comm, output, root, algorithm, tag);
}

void reduce(Communicator& comm, const at::Tensor& input, at::Tensor& output, int root, ReduceOp op, Algorithm algorithm,
            int tag) {
  check_pair(comm, "reduce", input, output, "output", input.numel());
  output.copy_(input.reshape(output.sizes()));
  reduce(comm, output, root, op, algorithm, tag);
}

void all_reduce(Communicator& comm, const at::Tensor& input, at::Tensor& output, ReduceOp op, Algorithm algorithm,
                int tag) {
  check_pair(comm, "all_reduce", input, output, "output", input.numel());
  output.copy_(input.reshape(output.sizes()));
  all_reduce(comm, output, op, algorithm, tag);
}

void reduce_scatter(Communicator& comm, const at::Tensor& input, at::Tensor& output, ReduceOp op, Algorithm algorithm,
                    int tag) {
  check_pair(comm, "reduce_scatter", input, output, "output",
             chunk_range(input.numel(), comm.size(), comm.rank()).count);
  at::Tensor work = input.reshape({-1}).clone();  // the whole buffer: the plan works on all of it
  const at::Tensor mine = reduce_scatter(comm, work, op, algorithm, tag);
  output.copy_(mine.reshape(output.sizes()));
}

void all_gather(Communicator& comm, const at::Tensor& input, at::Tensor& output, Algorithm algorithm, int tag) {
  const Range mine = chunk_range(output.defined() ? output.numel() : 0, comm.size(), comm.rank());
  check_pair(comm, "all_gather", input, output, "input", mine.count);  // this rank's chunk of output
  on_flat(output, [&](at::Tensor& flat) {
    flat.narrow(0, mine.offset, mine.count).copy_(input.reshape({-1}));
    all_gather(comm, flat, algorithm, tag);
  });
}

}  // namespace distlab::collectives
