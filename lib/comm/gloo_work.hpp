// One gloo operation as a DistLab Work: its waits bounded, its exceptions
// turned into DistLab's (TimeoutError, PeerClosed, CommError) naming the
// operation and the peer.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <string>

#include "comm/communicator.hpp"

namespace distlab::comm {

using GlooGroup = c10d::ProcessGroupGloo;
using GlooWorkPtr = decltype(std::declval<GlooGroup&>().barrier());

// Rethrows gloo's exception `e`, raised while doing `what` with `peer` (-1:
// a collective), as DistLab's.
[[noreturn]] void rethrow_gloo(const std::string& what, const std::exception& e, Milliseconds timeout, int peer);

// Waits for `work` for at most `limit`. Gloo's own bound on one wait: its
// context's timeout applies only when none is given, and a wait that times
// out fails the whole context.
void wait_gloo(const GlooWorkPtr& work, const std::string& what, Milliseconds limit, int peer);

class GlooWork : public Work {
 public:
  GlooWork(GlooWorkPtr work, std::string what, Milliseconds timeout, int peer)
      : work_(std::move(work)), what_(std::move(what)), timeout_(timeout), peer_(peer) {}
  void wait() override { wait_up_to(timeout_); }
  void wait_up_to(Milliseconds limit) override { wait_gloo(work_, what_, limit, peer_); }
  bool is_completed() override { return work_->isCompleted(); }

 private:
  GlooWorkPtr work_;
  std::string what_;
  Milliseconds timeout_;
  int peer_;
};

}  // namespace distlab::comm
