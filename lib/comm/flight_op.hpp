// How the communicator and the collectives write into the flight recorder
// (flight/recorder.hpp): one FlightOp per operation a caller asked for.
//
//   FlightOp op = FlightOp::collective(comm, "all_reduce", "ring", tensor, /*root=*/-1);
//   op.run([&] { ...the collective's steps... });   // started, then completed,
//                                                   // or failed + files written
//
// Only the outermost operation of a thread is recorded: the sends and recvs
// of a ring all-reduce, or the backend all-reduce that collectives::all_gather
// runs on, belong to the collective that called them and would only push
// older entries out of the ring. Their sequence numbers are not counted
// either, so every rank counts the same collectives alike.
#pragma once

#include <ATen/core/Tensor.h>

#include <exception>
#include <memory>
#include <string>

#include "comm/communicator.hpp"

namespace distlab::comm {

class FlightOp {
 public:
  // Records nothing (the recorder is off, or the call is nested).
  FlightOp() = default;
  // The next collective of comm's group. `tensor` may be undefined (barrier);
  // `root` is a rank of comm, or -1.
  static FlightOp collective(Communicator& comm, const char* op, const char* algorithm, const at::Tensor& tensor,
                             int root);
  // A send or recv; `seq` is its number among the messages of (peer, tag).
  static FlightOp p2p(Communicator& comm, const char* op, const at::Tensor& tensor, int peer, int tag, uint64_t seq);

  bool active() const { return ring_ != nullptr; }
  void start();
  void complete();
  // From a catch block: marks the operation timed out or failed, then writes
  // every rank's file of this process (the moment the job is known to hang).
  void fail(const std::exception& e);

  // body() between start() and complete(), as the outermost operation of
  // this thread; fail() and rethrow if it throws.
  template <typename Body>
  void run(Body&& body);

 private:
  std::shared_ptr<flight::Ring> ring_;
  flight::Recorder* recorder_ = nullptr;
  uint64_t id_ = 0;
};

// Marks this thread as inside a recorded operation while it lives.
class FlightNesting {
 public:
  FlightNesting();
  ~FlightNesting();
  FlightNesting(const FlightNesting&) = delete;
  FlightNesting& operator=(const FlightNesting&) = delete;
};

template <typename Body>
void FlightOp::run(Body&& body) {
  FlightNesting nested;
  start();
  try {
    body();
  } catch (const std::exception& e) {
    fail(e);
    throw;
  }
  complete();
}

// Wraps a send's or recv's Work: started when waited for, then completed or failed.
WorkPtr flight_work(WorkPtr work, FlightOp op);

// PyTorch's names: float32, int64, bfloat16, ...
std::string dtype_name(const at::Tensor& tensor);

// The recorder a job gets when none is given: DISTLAB_FLIGHT_ENTRIES and
// DISTLAB_FLIGHT_DIR, else `dir`. Throws SetupError for a bad setting.
std::shared_ptr<flight::Recorder> make_flight_recorder(const std::string& dir = ".");

}  // namespace distlab::comm
