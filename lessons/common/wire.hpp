// Rank 0's view of the trace: the bytes it sent in a window of time, for
// the lessons that put bytes per step beside their formulas. Thread ranks
// share one recorder; a process records its own.
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "trace/clock.hpp"
#include "trace/recorder.hpp"

namespace distlab::lessons {

class Wire {
 public:
  explicit Wire(comm::Communicator& world) : world_(world), sink_(std::make_shared<trace::MemorySink>()) {
    if (world.rank() == 0) world.recorder_ptr()->add_sink(sink_);
    world.barrier();
  }
  // Rank 0: the bytes its collectives' steps sent in [from, to] (each step's
  // span carries them); other ranks: 0.
  int64_t sent(int64_t from, int64_t to) const {
    return world_.rank() != 0 ? 0 : trace::bytes_sent(sink_->events(), world_.world_rank(), from, to);
  }
  // Rank 0: the bytes of every message it sent in [from, to], in a
  // collective or not (one "send" event each); other ranks: 0.
  int64_t messages_sent(int64_t from, int64_t to) const {
    if (world_.rank() != 0) return 0;
    int64_t bytes = 0;
    for (const trace::Event& e : sink_->events())
      if (e.rank == world_.world_rank() && e.category == "send" && e.begin_us >= from && e.end_us <= to)
        bytes += e.bytes;
    return bytes;
  }
  void clear() {
    world_.barrier();  // every rank's spans so far are in
    if (world_.rank() == 0) sink_->clear();
    world_.barrier();
  }

 private:
  comm::Communicator& world_;
  std::shared_ptr<trace::MemorySink> sink_;
};

}  // namespace distlab::lessons
