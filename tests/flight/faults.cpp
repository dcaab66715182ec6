#include "faults.hpp"

#include <signal.h>
#include <torch/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "collectives/collectives.hpp"
#include "fault_numbers.hpp"
#include "flight/dump_file.hpp"
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

bool inside_the_fault(const flight::Dump& ring) { return entered(ring, "all_reduce", kFaultSeq); }

bool on_threads(const comm::Communicator& comm) { return comm.backend() == "threads"; }

// Across processes the culprit cannot read another rank's ring: that rank
// writes it to its flight file once it is inside all_reduce #4, with this
// reason, which also tells the file from one an earlier run left.
constexpr const char* kInsideTheFault = "flight test: inside the fault";

// What the culprit sees of rank r's record: on thread ranks its ring, in
// processes the file it wrote once inside the fault (empty until then).
flight::Dump record_of(const comm::Communicator& comm, flight::Recorder& recorder, int r) {
  if (on_threads(comm)) return recorder.ring_of(r, comm.size())->snapshot();
  try {
    flight::Dump file = flight::read_dump(flight::dump_path(recorder.options().dir, r));
    if (file.reason == kInsideTheFault) return file;
  } catch (const flight::BadDump&) {
    // not written yet
  }
  return {};
}

// The other ranks' side across processes: while it lives, a thread waits
// for this rank's ring to show all_reduce #4 entered, then writes the file
// the culprit reads. Nothing on thread ranks, whose rings the culprit reads.
class ShowWhenInsideTheFault {
 public:
  explicit ShowWhenInsideTheFault(comm::Communicator& comm) {
    flight::Recorder* recorder = comm.flight_recorder();
    const std::shared_ptr<flight::Ring> ring = comm.flight_ring_ptr();
    if (on_threads(comm) || recorder == nullptr || ring == nullptr) return;
    watcher_ = std::thread([this, recorder, ring] {
      while (!stop_) {
        if (inside_the_fault(ring->snapshot())) {
          recorder->dump(kInsideTheFault);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  }
  ~ShowWhenInsideTheFault() {
    stop_ = true;
    if (watcher_.joinable()) watcher_.join();
  }
  ShowWhenInsideTheFault(const ShowWhenInsideTheFault&) = delete;
  ShowWhenInsideTheFault& operator=(const ShowWhenInsideTheFault&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread watcher_;
};

// A culprit that stops, or whose call does not match the others', waits
// until every other rank has entered all_reduce #4 (their records say so)
// before it acts: otherwise the job could end while a slower rank is still
// in #3 (or before #3's last bytes from the culprit reached it), and the
// diagnosis would rightly list fewer ranks in #4 than the test expects.
// Waits on the records, not on a clock; gives up after 10 s with the rank
// it waited for.
void wait_until_the_others_entered_the_fault(comm::Communicator& comm) {
  flight::Recorder* recorder = comm.flight_recorder();
  if (recorder == nullptr) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int r = 0; r < comm.size(); ++r) {
    if (r == comm.rank()) continue;
    while (!inside_the_fault(record_of(comm, *recorder, r))) {
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
      const bool mistagged = me && round == kP2pRounds - 1;
      auto sent = comm.isend(out, next, mistagged ? kP2pWrongTag : 0);
      comm.recv(in, previous, /*tag=*/0);
      // Processes: the culprit waits for its mistagged send longer than
      // the timeout, so that the rank waiting for it always times out
      // first, whichever posted its wait first (the launcher then stops
      // the culprit, or it fails on the closed connection).
      if (mistagged && !on_threads(comm))
        sent->wait_up_to(3 * comm.timeout());
      else
        sent->wait();
    }
    return;
  }
  if (fault == "skip" && me) return;
  // dead, order and shape: the culprit acts once the others are inside #4.
  const bool culprit_waits = fault != "skip" && culprit < comm.size();
  if (me) wait_until_the_others_entered_the_fault(comm);
  if (fault == "dead" && me) {
    if (on_threads(comm)) throw std::runtime_error("injected: rank " + std::to_string(culprit) + " stops");
    kill(getpid(), SIGKILL);
  }
  if (fault == "order" && me) {
    collectives::broadcast(comm, weights, 0, Algorithm::kTree);
    collectives::all_reduce(comm, grads, comm::ReduceOp::kSum, Algorithm::kRing);
    return;
  }
  auto last = fault == "shape" && me ? torch::ones({256}) : grads;
  {
    std::optional<ShowWhenInsideTheFault> shown;
    if (culprit_waits && !me) shown.emplace(comm);
    collectives::all_reduce(comm, last, comm::ReduceOp::kSum, Algorithm::kRing);  // #4
  }
  if (fault == "order") collectives::broadcast(comm, weights, 0, Algorithm::kTree);
}

}  // namespace distlab::flight_test
