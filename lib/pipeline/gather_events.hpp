// Every rank's trace events of one pipeline step, on every rank: what
// pipeline::measure needs when the ranks are processes, each with only its
// own events.
//
// Thread ranks share one recorder; gloo and nccl processes each have their
// own. So each rank contributes only the events it recorded itself (rank ==
// its rank), and the library's all-gather (collectives::all_gather, from
// point-to-point messages) brings everybody's to everybody. One clock
// (CLOCK_MONOTONIC) serves every process of a machine, so the times stay
// comparable; ranks on other machines would need their clock offsets
// (comm/clock_sync.hpp) first.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.hpp"
#include "pipeline/schedule.hpp"
#include "trace/event.hpp"

namespace distlab::pipeline {

// Every rank calls it, with the events this process recorded (`mine` may
// hold other ranks' too: only this rank's are sent). Returns, on every rank,
// the compute and message events (fwd, bwd, bwd_input, bwd_weight, send,
// recv) that the executor recorded on stage lanes for `schedule` in step
// `step`, rank by rank, each rank's in the order recorded. Each comes back
// with its rank, lane, category, begin and end, and the args stage, schedule
// and step: what pipeline::measure reads, not the name, bytes or peer.
std::vector<trace::Event> gather_step_events(comm::Communicator& comm, const std::vector<trace::Event>& mine,
                                             const Schedule& schedule, int64_t step);

}  // namespace distlab::pipeline
