#include "faults.hpp"

#include <signal.h>
#include <torch/types.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "collectives/collectives.hpp"
#include "fault_numbers.hpp"
#include "flight/recorder.hpp"
#include "flight/site.hpp"

namespace distlab::flight_test {

using collectives::Algorithm;

namespace {

bool entered(const flight::Dump& ring, const char* op, uint64_t seq) {
  for (const flight::Entry& e : ring.entries) {
    if (e.group == "world" && e.op == op && e.seq == seq) return true;
  }
  return false;
}

// On thread ranks, a culprit whose call does not match the others' waits
// until every other rank has entered all_reduce #4 (their flight rings say
// so) before it makes its own: otherwise the mismatch could end the job
// while a slower rank is still in #3, and the diagnosis would rightly list
// fewer ranks in #4 than the test expects. Waits on the records, not on a
// clock; gives up after 10 s with the rank it waited for.
void wait_until_the_others_entered_the_fault(comm::Communicator& comm) {
  flight::Recorder* recorder = comm.flight_recorder();
  if (comm.backend() != "threads" || recorder == nullptr) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int r = 0; r < comm.size(); ++r) {
    if (r == comm.rank()) continue;
    const auto ring = recorder->ring_of(r, comm.size());
    while (!entered(ring->snapshot(), "all_reduce", kFaultSeq)) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("fault injection: rank " + std::to_string(r) + " never entered all_reduce #" +
                                 std::to_string(kFaultSeq));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

}  // namespace

void run_fault(comm::Communicator& comm, const std::string& fault, int culprit) {
  flight::Site lesson("flight test " + fault);
  auto weights = torch::ones({16});
  collectives::broadcast(comm, weights, /*root=*/0, Algorithm::kTree);  // #0
  auto grads = torch::ones({1024});
  for (int step = 0; step < 3; ++step) {  // #1-#3
    flight::Site site("step " + std::to_string(step));
    collectives::all_reduce(comm, grads, comm::ReduceOp::kSum, Algorithm::kRing);
  }
  const bool me = comm.rank() == culprit;
  flight::Site site("step 3");
  if (fault == "p2p") {
    const int next = (comm.rank() + 1) % comm.size();
    const int previous = (comm.rank() + comm.size() - 1) % comm.size();
    auto out = torch::full({8}, static_cast<float>(comm.rank()));
    auto in = torch::empty({8});
    for (int round = 0; round < kP2pRounds; ++round) {
      const int tag = me && round == kP2pRounds - 1 ? kP2pWrongTag : 0;
      auto sent = comm.isend(out, next, tag);
      comm.recv(in, previous, /*tag=*/0);
      sent->wait();
    }
    return;
  }
  if (fault == "skip" && me) return;
  if (fault == "dead" && me) {
    // Long enough for the others to be inside #4 and for #3's last bytes to
    // have reached them.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (comm.backend() == "threads") throw std::runtime_error("injected: rank " + std::to_string(culprit) + " stops");
    kill(getpid(), SIGKILL);
  }
  if ((fault == "order" || fault == "shape") && me) wait_until_the_others_entered_the_fault(comm);
  if (fault == "order" && me) {
    collectives::broadcast(comm, weights, 0, Algorithm::kTree);
    collectives::all_reduce(comm, grads, comm::ReduceOp::kSum, Algorithm::kRing);
    return;
  }
  auto last = fault == "shape" && me ? torch::ones({256}) : grads;
  collectives::all_reduce(comm, last, comm::ReduceOp::kSum, Algorithm::kRing);  // #4
  if (fault == "order") collectives::broadcast(comm, weights, 0, Algorithm::kTree);
}

}  // namespace distlab::flight_test
