// Collectives that run while the caller goes on.
//
// DDP starts a bucket's all-reduce the moment its last gradient is ready,
// while backward keeps computing the gradients of earlier layers. On CPU
// that needs a second thread: a CommThread owns one, and runs the
// collectives handed to it one after the other, in the order they were
// submitted. Every rank submits the same collectives in the same order (as
// collectives always require), so the ranks' comm threads meet.
//
//   CommThread comm_thread(comm);
//   WorkPtr work = all_reduce_async(comm_thread, bucket, ReduceOp::kSum, Algorithm::kRing);
//   ... backward goes on ...
//   work->wait();   // rethrows the collective's error; never waits forever
//
// Any algorithm of collectives.hpp and the native one run this way. The
// submitting thread must not use `comm` for other traffic with the same
// tags while work is queued.
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "collectives/plan.hpp"
#include "comm/communicator.hpp"

namespace distlab::collectives {

struct AsyncJob;

class CommThread {
 public:
  explicit CommThread(comm::Communicator& comm);
  // Runs what is queued to its end, then joins the thread.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  comm::Communicator& comm() const { return comm_; }

  // Queues `run` (blocking calls on comm()); `what` names it in errors.
  comm::WorkPtr submit(std::string what, std::function<void()> run);

 private:
  void loop();

  comm::Communicator& comm_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<AsyncJob>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

// all_reduce(comm, tensor, op, algorithm, tag) on the comm thread. `tensor`
// must stay alive and untouched until the Work's wait() returns.
comm::WorkPtr all_reduce_async(CommThread& thread, at::Tensor tensor, comm::ReduceOp op = comm::ReduceOp::kSum,
                               Algorithm algorithm = Algorithm::kNative, int tag = 0);

}  // namespace distlab::collectives
