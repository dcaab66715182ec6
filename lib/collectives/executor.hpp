// Runs any Plan on one rank over a Communicator: the one place where a
// collective's steps turn into messages.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "collectives/plan.hpp"
#include "comm/communicator.hpp"

namespace distlab::collectives {

// Runs this rank's part of `plan` on `flat`, a contiguous 1-D tensor of
// plan.count elements, in place; every rank of `comm` calls it with the
// same plan and tag. For each step:
//   1. post an irecv for each piece coming in: straight into the buffer for
//      a copy, into scratch for a reduction (or for a copy over a range this
//      rank is sending in the same step);
//   2. post an isend for each piece going out (reading the buffer as it was
//      when the step began: nothing is written until every send is done);
//   3. wait for all of them, then combine (op) or copy the scratch pieces in.
// With kAvg, divides result_range(plan, rank) by p at the end. Scratch is
// the most one step receives to combine; on the CPU, from
// kScratchKeptFromBytes on, it is the calling thread's buffer, kept between
// calls and grown to the largest asked for (the pages are not paid again);
// below that, and on a GPU, allocated once per call. Each step is traced as one "step" event on the
// comm lane of every rank, idle or not, so that timelines line up (args:
// collective, algorithm, step, steps, phase, chunk sent, recv_chunk, tag).
// Errors name the collective and the step that failed.
void run_plan(comm::Communicator& comm, const Plan& plan, at::Tensor& flat, comm::ReduceOp op, int tag);
inline constexpr int64_t kScratchKeptFromBytes = int64_t{1} << 20;

// Names the "collective" span around one call that runs `plan` on `flat`
// (its steps nest in it): "all_reduce ring [tensor]" in a group, its bytes,
// and args collective, algorithm, count, dtype; the caller adds its own
// (op, root, steps) after them.
void describe_call(trace::Span& span, const comm::Communicator& comm, const Plan& plan, const at::Tensor& flat,
                   int64_t count);

// Runs this rank's part of an all_to_all plan from `input` into `output`
// (contiguous 1-D, plan.input_count(rank) and plan.output_count(rank)
// elements): the own block copied, then per step the irecvs straight into
// output, the isends straight from input (two buffers: nothing is
// overwritten that is still to be sent), wait. Traced and named as
// run_plan's steps.
void run_exchange(comm::Communicator& comm, const Plan& plan, const at::Tensor& input, at::Tensor& output, int tag);

}  // namespace distlab::collectives
