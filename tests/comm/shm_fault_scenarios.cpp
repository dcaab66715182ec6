#include "shm_fault_scenarios.hpp"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "comm/shm_links.hpp"
#include "trace/recorder.hpp"
#include "worker_checks.hpp"

namespace distlab::comm::testing {
namespace {

int my_rank = -1;
std::atomic<uint64_t> barriers{0};     // this process's barriers passed so far
std::atomic<uint64_t> fault_after{0};  // the last rank meets its fault after this many; 0: none
std::string fault_kind;                // kill | stop
uint64_t second = 0;                   // barriers passed before the all-reduce that meets the fault
std::atomic<uint64_t> wait_after{0};   // rank 1 waits for rank 0's exit after this many barriers; 0: none
std::atomic<int64_t> rank_0_pid{0};

// This process's entries in /dev/shm ("distlab.<pid>.*").
std::string my_segments() {
  std::string found;
  const std::string mine = "distlab." + std::to_string(getpid()) + ".";
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.rfind(mine, 0) == 0) found += (found.empty() ? "" : " ") + name;
    }
    closedir(dir);
  }
  return found;
}

// SIGKILL: no handler, no goodbye. SIGSTOP: alive and silent, until the
// test kills it once the others have ended.
void meet(const std::string& fault, const std::string& where) {
  std::cout << "rank " << my_rank << ": " << (fault == "kill" ? "killed " : "stopped ") << where << std::endl;
  raise(fault == "kill" ? SIGKILL : SIGSTOP);
}

// Rank 1, once the last rank is dead: at most 20 s for rank 0 to find it,
// leave the collective and exit, before rank 1 goes on to read rank 0.
void wait_until_rank_0_exits() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (kill(static_cast<pid_t>(rank_0_pid.load()), 0) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool gone = kill(static_cast<pid_t>(rank_0_pid.load()), 0) != 0;
  std::cout << "rank 1: rank 0 " << (gone ? "has exited" : "is still there") << " before rank 1 reads it"
            << std::endl;
}

// Every rank's pid, by rank, through the communicator's own all-reduce.
std::vector<int64_t> pids_of(Communicator& comm) {
  at::Tensor pids = torch::zeros({comm.size()}, torch::kLong);
  pids[comm.rank()] = static_cast<int64_t>(getpid());
  comm.native_all_reduce(pids, ReduceOp::kSum);
  return std::vector<int64_t>(pids.data_ptr<int64_t>(), pids.data_ptr<int64_t>() + comm.size());
}

// Rank 0's watch on the ring the victim writes to it (its counter samples
// after each read, comm/shm_links.hpp): the ring has carried nothing before
// this message, so its tail past the 48-byte header is what rank 0 has read
// of it. Once part of the message is read and more is in the ring, unread,
// the victim is killed: the rest of the message can never come.
class KillWhenInFlight : public trace::Sink {
 public:
  KillWhenInFlight(int victim, pid_t pid, int64_t bytes)
      : prefix_("shm ring " + std::to_string(victim) + "->0 (world "), victim_(victim), pid_(pid), bytes_(bytes) {}

  void write(const trace::Event& e) override {
    if (killed_ || !e.is_counter() || e.name.rfind(prefix_, 0) != 0) return;
    const int64_t head = std::stoll(e.arg("head", "0")), tail = std::stoll(e.arg("tail", "0"));
    const int64_t read = tail - 48;
    if (read <= 0 || read >= bytes_ || head <= tail) return;
    kill(pid_, SIGKILL);
    killed_ = true;
    std::cout << "rank 0: killed rank " << victim_ << " with " << read << " of " << bytes_ << " bytes read and "
              << head - tail << " more in its ring" << std::endl;
  }

 private:
  std::string prefix_;
  int victim_;
  pid_t pid_;
  int64_t bytes_;
  std::atomic<bool> killed_{false};
};

}  // namespace

void say_pid(int rank) {
  my_rank = rank;
  std::cout << "rank " << rank << " pid " << getpid() << std::endl;
}

void arm_kill_in_setup(int rank, int world_size) {
  if (rank != world_size - 1) return;
  set_shm_fault_point([](const std::string& point) {
    if (point == "created") meet("kill", "with its segment " + my_segments() + " not yet unlinked");
  });
}

void arm_kill_before_page(int rank, int world_size) {
  if (rank != world_size - 1) return;
  set_shm_fault_point([](const std::string& point) {
    if (point == "page") meet("kill", "before publishing its process page");
  });
}

void killed_mid_transfer(Communicator& comm) {
  const int last = comm.size() - 1, me = comm.rank();
  const std::vector<int64_t> pids = pids_of(comm);
  const int64_t n = 16 << 20;  // 64 MiB of floats, 32 times the ring
  if (me == last) {
    auto go = torch::empty({1});
    comm.recv(go, 0, 4);
    comm.isend(torch::ones({n}), 0, 3)->wait();
    check(false, "the whole message went out: nobody killed this rank", me);
  } else if (me == 0) {
    comm.recorder()->add_sink(std::make_shared<KillWhenInFlight>(last, static_cast<pid_t>(pids[last]), n * 4));
    auto into = torch::empty({n});
    WorkPtr receiving = comm.irecv(into, last, 3);
    comm.send(torch::ones({1}), last, 4);
    receiving->wait();
    check(false, "the whole message arrived: no bytes were seen in flight", me);
  } else {
    auto never = torch::empty({1});
    comm.recv(never, last, 5);
    check(false, "a message rank " + std::to_string(last) + " never sent arrived", me);
  }
}

void collective_fault(Communicator& comm, const std::string& collective, const std::string& fault) {
  const int me = comm.rank(), p = comm.size();
  const int64_t n = 1 << 18;  // 1 MiB of floats
  set_shm_fault_point([me, p](const std::string& point) {
    if (point != "barrier") return;
    const uint64_t passed = ++barriers;
    if (me == p - 1 && passed == fault_after.load())
      meet(fault_kind, "inside the all_reduce after its barrier " + std::to_string(passed - second));
    if (me == 1 && passed == wait_after.load()) wait_until_rank_0_exits();
  });
  auto all_reduce = [&](at::Tensor& t) {
    if (collective == "parts")
      comm.native_all_reduce_parts({t.slice(0, 0, 100000), t.slice(0, 100000, 100003), t.slice(0, 100003, n)}, 1.0);
    else
      comm.native_all_reduce(t, ReduceOp::kSum);
  };
  // 1. Whole, against a sum this rank computes: the barriers it takes show
  // the path (the arena: two a chunk; one copy, of a tensor or of parts: 3).
  at::Tensor want = input_of(0, n, 4);
  for (int r = 1; r < p; ++r) want += input_of(r, n, 4);
  at::Tensor t = input_of(me, n, 4);
  const uint64_t before = barriers;
  all_reduce(t);
  check(torch::equal(t, want), "the all_reduce before the fault", me);
  std::cout << "rank " << me << ": the all_reduce took " << barriers - before << " barriers" << std::endl;
  // 2. Again; the last rank meets its fault inside it: in the arena after
  // the first barrier of the second chunk, in one copy after the first
  // barrier (every rank has published where its tensor or table is, and
  // reads the others').
  fault_kind = fault;
  rank_0_pid = pids_of(comm)[0];
  second = barriers;
  if (me == p - 1) fault_after = second + (collective == "arena" ? 3 : 1);
  // In one copy, rank 1 then reads rank 0's tensor or table only once rank
  // 0, which finds the dead rank first, has left and exited: rank 1 must
  // still name the dead rank, not the one that left.
  if (me == 1 && fault == "kill" && collective != "arena") wait_after = second + 1;
  t = input_of(me, n, 4);
  all_reduce(t);
  check(false, "the all_reduce completed though rank " + std::to_string(p - 1) + " met its fault inside it", me);
}

void table_mismatch(Communicator& comm) {
  const int64_t n = 1 << 16;  // 256 KiB of floats: in one copy from 64 KiB on (DISTLAB_SHM_SINGLE_COPY=1)
  at::Tensor t = input_of(comm.rank(), n, 5);
  if (comm.rank() == 0)
    comm.native_all_reduce_parts({t.slice(0, 0, 1000), t.slice(0, 1000, n)}, 1.0);
  else
    comm.native_all_reduce(t, ReduceOp::kSum);
  check(false, "an all_reduce of parts met an all_reduce of one tensor and went through", comm.rank());
}

}  // namespace distlab::comm::testing
