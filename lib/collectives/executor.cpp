#include "collectives/executor.hpp"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "collectives/tags.hpp"
#include "comm/peer_closed.hpp"

namespace distlab::collectives {
namespace {

bool overlaps(const Range& a, const Range& b) { return a.offset < b.offset + b.count && b.offset < a.offset + a.count; }

bool sends_from(const Step& step, int rank, const Range& range) {
  for (const Transfer& t : step.transfers)
    if (t.src == rank && overlaps(t.range, range)) return true;
  return false;
}

bool needs_scratch(const Step& step, int rank, const Transfer& t) {
  return t.reduce || sends_from(step, rank, t.range);
}

// The most elements this rank receives into scratch in any one step.
int64_t scratch_elements(const Plan& plan, int rank) {
  int64_t most = 0;
  for (const Step& step : plan.steps) {
    int64_t elements = 0;
    for (const Transfer& t : step.transfers)
      if (t.dst == rank && needs_scratch(step, rank, t)) elements += t.range.count;
    most = std::max(most, elements);
  }
  return most;
}

// Where a step's incoming pieces land before they are combined: this
// thread's buffer, kept between calls and grown to the largest asked for.
// A fresh one would cost its pages again on every call (a 32 MB buffer is
// 8192 page faults, about as long as the copy into it: the ring's time at
// 64 MB and more halved without them, docs/benchmarks-wire.md), as
// PyTorch's caching allocator keeps a freed block for the next request.
// One collective runs at a time on a thread, so no two share it. Below 1
// MiB the heap serves a buffer without new pages, and GPU tensors come
// from LibTorch's caching allocator already: neither is kept.
at::Tensor scratch_for(int64_t count, const at::Tensor& like) {
  constexpr int64_t kKeptFrom = 1 << 20;  // bytes
  if (!like.device().is_cpu() || count * static_cast<int64_t>(like.element_size()) < kKeptFrom)
    return at::empty({count}, like.options());
  thread_local at::Tensor kept;
  if (!kept.defined() || kept.numel() < count || kept.scalar_type() != like.scalar_type())
    kept = at::empty({count}, like.options());  // CPU, as `like`
  return kept.narrow(0, 0, count);
}

// "3" for one chunk, "2-3" for a block, "all" for the whole buffer; a comma
// between the pieces of one step.
std::string chunks_moved(const Step& step, int rank, bool outgoing) {
  std::string text;
  for (const Transfer& t : step.transfers) {
    if ((outgoing ? t.src : t.dst) != rank) continue;
    std::string piece = t.chunk < 0     ? "all"
                        : t.chunks == 1 ? std::to_string(t.chunk)
                                        : std::to_string(t.chunk) + "-" + std::to_string(t.chunk + t.chunks - 1);
    text += (text.empty() ? "" : ",") + piece;
  }
  return text;
}

void describe_step(trace::Span& span, const Plan& plan, size_t s, int rank, int tag) {
  const Step& step = plan.steps[s];
  int64_t bytes = 0;
  for (const Transfer& t : step.transfers)
    if (t.src == rank) bytes += t.range.count * plan.elem_bytes;
  span.set_name(step.phase + " step " + std::to_string(s))
      .set_bytes(bytes)
      .arg("collective", to_string(plan.collective))
      .arg("algorithm", to_string(plan.algorithm))
      .arg("step", s)
      .arg("steps", plan.steps.size())
      .arg("phase", step.phase)
      .arg("chunk", chunks_moved(step, rank, /*outgoing=*/true))
      .arg("recv_chunk", chunks_moved(step, rank, /*outgoing=*/false))
      .arg("tag", step_tag(tag, s));
}

std::string where(const Plan& plan, size_t s, const at::Tensor& flat) {
  return std::string(to_string(plan.collective)) + " (" + to_string(plan.algorithm) + ", " +
         std::to_string(plan.count) + " " + std::string(c10::toString(flat.scalar_type())) + " elements) step " +
         std::to_string(s) + " of " + std::to_string(plan.steps.size()) + " (" + plan.steps[s].phase + ") failed. ";
}

// A piece that arrived in scratch and still has to be combined or copied in.
struct Landing {
  at::Tensor target;  // the buffer's elements it belongs to
  at::Tensor data;    // where it arrived
  bool reduce;
};

void check_fits(const comm::Communicator& comm, const Plan& plan, const at::Tensor& flat, int64_t count,
                const char* call) {
  if (plan.world_size != comm.size())
    throw comm::CommError(comm.self() + ": a plan for " + std::to_string(plan.world_size) +
                          " ranks cannot run on a communicator of " + std::to_string(comm.size()));
  if (flat.dim() != 1 || !flat.is_contiguous() || flat.numel() != count)
    throw comm::CommError(comm.self() + ": " + call + " needs a contiguous 1-D tensor of " + std::to_string(count) +
                          " elements, got " + std::to_string(flat.numel()));
}

// Runs one step inside its trace span, naming the step in any error.
template <typename Body>
void traced_step(comm::Communicator& comm, const Plan& plan, size_t s, int tag, const at::Tensor& flat, Body&& body) {
  trace::Span span(comm.recorder(), comm.world_rank(), trace::kLaneComm, "step", "step");
  if (span.active()) {
    describe_step(span, plan, s, comm.rank(), tag);
    comm.label(span);
  }
  try {
    body(step_tag(tag, s));
  } catch (const comm::PeerClosed& e) {
    // A peer that died is the cause: no hint about mismatched calls.
    comm::rethrow_with_context(where(plan, s, flat), e);
  } catch (const comm::CommError& e) {
    // The inner message names this rank and its peer already.
    comm::rethrow_with_context(where(plan, s, flat), e,
                               " (every rank must call the same collective with the same element count and dtype)");
  }
}

}  // namespace

void describe_call(trace::Span& span, const comm::Communicator& comm, const Plan& plan, const at::Tensor& flat,
                   int64_t count) {
  comm.label(span);
  // A group's collective says which group: "all_reduce ring [tensor]".
  span.set_name(std::string(to_string(plan.collective)) + " " + to_string(plan.algorithm) +
                (comm.is_world() ? std::string() : " [" + comm.group() + "]"))
      .set_bytes(static_cast<int64_t>(flat.nbytes()))
      .arg("collective", to_string(plan.collective))
      .arg("algorithm", to_string(plan.algorithm))
      .arg("count", count)
      .arg("dtype", std::string(c10::toString(flat.scalar_type())));
}

void run_plan(comm::Communicator& comm, const Plan& plan, at::Tensor& flat, comm::ReduceOp op, int tag) {
  const int me = comm.rank();
  check_fits(comm, plan, flat, plan.count, "run_plan");
  check_collective_tag(tag);

  at::Tensor scratch = scratch_for(scratch_elements(plan, me), flat);

  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const Step& step = plan.steps[s];
    traced_step(comm, plan, s, tag, flat, [&](int message_tag) {
      std::vector<comm::WorkPtr> pending;
      std::vector<Landing> landings;
      int64_t cursor = 0;
      for (const Transfer& t : step.transfers) {
        if (t.dst != me) continue;
        at::Tensor target = flat.narrow(0, t.range.offset, t.range.count);
        if (needs_scratch(step, me, t)) {
          at::Tensor data = scratch.narrow(0, cursor, t.range.count);
          cursor += t.range.count;
          pending.push_back(comm.irecv(data, t.src, message_tag));
          landings.push_back({target, data, t.reduce});
        } else {
          pending.push_back(comm.irecv(target, t.src, message_tag));
        }
      }
      for (const Transfer& t : step.transfers)
        if (t.src == me)
          pending.push_back(comm.isend(flat.narrow(0, t.range.offset, t.range.count), t.dst, message_tag));
      for (auto& work : pending) work->wait();
      for (Landing& landing : landings) {
        if (landing.reduce)
          comm::combine_into(landing.target, landing.data, op);
        else
          landing.target.copy_(landing.data);
      }
    });
  }

  const Range result = result_range(plan, me);
  if (result.count > 0) {
    at::Tensor mine = flat.narrow(0, result.offset, result.count);
    comm::finish_average(mine, op, plan.world_size);
  }
}

void run_exchange(comm::Communicator& comm, const Plan& plan, const at::Tensor& input, at::Tensor& output, int tag) {
  const int me = comm.rank();
  if (plan.collective != Collective::kAllToAll)
    throw comm::CommError(comm.self() + ": run_exchange runs all_to_all plans, not " + to_string(plan.collective));
  check_fits(comm, plan, input, plan.input_count(me), "all_to_all's input");
  check_fits(comm, plan, output, plan.output_count(me), "all_to_all's output");
  check_collective_tag(tag);
  const Range own_in = plan.input_block(me, me), own_out = plan.output_block(me, me);
  output.narrow(0, own_out.offset, own_out.count).copy_(input.narrow(0, own_in.offset, own_in.count));
  // Tagged by the distance dst - src (mod p), not by the step's index: a
  // plan built from one rank's counts (all_to_all_v) leaves out the steps
  // where that rank has nothing to move, so indices differ between ranks.
  auto tag_of = [&](const Transfer& t) { return step_tag(tag, (t.dst - t.src + plan.world_size) % plan.world_size); };
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    traced_step(comm, plan, s, tag, input, [&](int) {
      std::vector<comm::WorkPtr> pending;
      for (const Transfer& t : plan.steps[s].transfers) {
        if (t.dst != me) continue;
        const Range lands = t.landing();
        at::Tensor target = output.narrow(0, lands.offset, lands.count);
        pending.push_back(comm.irecv(target, t.src, tag_of(t)));
      }
      for (const Transfer& t : plan.steps[s].transfers)
        if (t.src == me)
          pending.push_back(comm.isend(input.narrow(0, t.range.offset, t.range.count), t.dst, tag_of(t)));
      for (auto& work : pending) work->wait();
    });
  }
}

}  // namespace distlab::collectives
