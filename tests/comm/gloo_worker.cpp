// One rank of a multi-process job, started by distlab-run in gloo_test.cpp
// and shm_test.cpp, or one by one in shm_faults_test.cpp. Every rank
// computes what every other rank must hold, so each checks the data it
// received against values it derives on its own (worker_checks.hpp).
//
//   distlab-run --nproc-per-node 3 -- comm_gloo_worker --scenario exchange
#include <CLI/CLI.hpp>
#include <torch/types.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/wait_for_rank.hpp"
#include "memory/allocator_meter.hpp"
#include "shm_fault_scenarios.hpp"
#include "trace/recorder.hpp"
#include "worker_checks.hpp"

using distlab::comm::Communicator;
using distlab::comm::ReduceOp;
using distlab::comm::testing::check;
using distlab::comm::testing::failures;
using distlab::comm::testing::input_of;
using distlab::comm::testing::job_salt;

namespace {

void exchange(Communicator& comm) {
  const int p = comm.size(), me = comm.rank();
  // Where the backend carries tensors (a GPU under nccl); the checks compare on the CPU.
  const at::Device dev = comm.device();
  auto on = [&](const at::Tensor& t) { return t.to(dev); };
  // Every rank sends to every other rank at once, several dtypes and sizes.
  for (auto dtype : {at::kFloat, at::kDouble, at::kLong, at::kBFloat16}) {
    for (int64_t n : {0, 1, 1000, 1 << 18, 3 << 19}) {
      // 3 << 19 floats (6 MiB): past a shared-memory ring, in one copy there; one dtype is enough.
      if (n == (3 << 19) && dtype != at::kFloat) continue;
      std::vector<distlab::comm::WorkPtr> pending;
      std::vector<at::Tensor> out(p), in(p);
      for (int peer = 0; peer < p; ++peer) {
        if (peer == me) continue;
        out[peer] = on(input_of(me, n, peer, dtype));
        in[peer] = torch::empty({n}, torch::TensorOptions().dtype(dtype).device(dev));
        pending.push_back(comm.isend(out[peer], peer, 5));
        pending.push_back(comm.irecv(in[peer], peer, 5));
      }
      for (auto& w : pending) w->wait();
      for (int peer = 0; peer < p; ++peer)
        if (peer != me) check(torch::equal(in[peer].cpu(), input_of(peer, n, me, dtype)), "send/recv", me);
    }
  }
  // Native collectives against a sum every rank computes by itself.
  for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    at::Tensor want = input_of(0, 10007, 1, at::kDouble);
    for (int r = 1; r < p; ++r) distlab::comm::combine_into(want, input_of(r, 10007, 1, at::kDouble), op);
    distlab::comm::finish_average(want, op, p);
    auto t = on(input_of(me, 10007, 1, at::kDouble));
    comm.native_all_reduce(t, op);
    check(torch::allclose(t.cpu(), want), std::string("all_reduce ") + to_string(op), me);
    for (int root = 0; root < p; ++root) {
      auto r = on(input_of(me, 10007, 1, at::kDouble));
      comm.native_reduce(r, root, op);
      check(me != root || torch::allclose(r.cpu(), want), "reduce", me);
      check(me == root || torch::equal(r.cpu(), input_of(me, 10007, 1, at::kDouble)), "reduce left a non-root alone", me);
    }
  }
  for (int root = 0; root < p; ++root) {
    auto b = on(input_of(me, 999, 2));
    comm.native_broadcast(b, root);
    check(torch::equal(b.cpu(), input_of(root, 999, 2)), "broadcast", me);
  }
  comm.barrier();
  std::cout << "rank " << me << " of " << p << ": " << (failures == 0 ? "all checks passed" : "FAILED") << std::endl;
}

// Messages that do not fit the recv: rank 1 refuses each one naming both
// sides and takes the next message on the same tag intact; then one refusal
// it does not catch ends the job with that line (gloo alone would end rank 1
// on an assertion in its network thread, or fill part of the tensor).
void mismatch(Communicator& comm) {
  const int tag = 6;
  if (comm.rank() == 0) {
    for (auto t : {torch::ones({50}), torch::ones({100}), torch::ones({3}, torch::kInt), torch::arange(4.0f),
                   torch::ones({8})})
      comm.send(t, 1, tag);
    return;
  }
  auto refused = [&](at::Tensor into, const std::string& want) {
    try {
      comm.recv(into, 0, tag);
      check(false, "a recv of a message that does not fit was not refused", 1);
    } catch (const distlab::comm::CommError& e) {
      const std::string message = e.what();
      check(message.find(want) != std::string::npos, "the refusal reads: " + message, 1);
    }
  };
  refused(torch::empty({100}), "rank 1: recv from rank 0 (tag 6): rank 0 sent 50 Float elements but the recv expects 100 Float elements");
  refused(torch::empty({60}), "rank 0 sent 100 Float elements but the recv expects 60 Float elements");
  refused(torch::empty({3}), "rank 0 sent 3 Int elements but the recv expects 3 Float elements");
  auto intact = torch::empty({4});
  comm.recv(intact, 0, tag);
  check(torch::equal(intact, torch::arange(4.0f)), "the message after three refused ones", 1);
  std::cout << "rank 1: three messages refused, the next one intact" << std::endl;
  auto shorter = torch::empty({4});
  comm.recv(shorter, 0, tag);  // rank 0 sent 8: this one ends the job
}

// settle() on the job's communicator waits for the sends of a group split
// off it too: rank 0 sends 1 MiB on the group, rank 1 takes it a moment
// later; once rank 0's settle() returns, its copy of the message is freed
// (what the send's Work still holds is its 24-byte header).
void settle(Communicator& comm) {
  auto group = comm.new_group({0, 1}, "settle");
  distlab::memory::AllocatorMeter& meter = distlab::memory::AllocatorMeter::install();
  const int64_t n = 1 << 18;  // 1 MiB of floats
  if (comm.rank() == 0) {
    const int64_t before = meter.allocated();
    distlab::comm::WorkPtr sent = group->isend(input_of(0, n, 3), 1, 4);
    comm.barrier();
    comm.settle();
    const int64_t held = meter.allocated() - before;
    check(held >= 0 && held < 1024, "bytes still held after settle(): " + std::to_string(held), 0);
    std::cout << "rank 0: after settle() the group's send holds " << (held < 1024 ? "less than 1 KiB" : "the message")
              << std::endl;
    sent->wait();
  } else if (comm.rank() == 1) {
    comm.barrier();
    // Late on purpose: a settle() that does not wait for the group's
    // payload reads the meter before this recv takes it.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    at::Tensor into = torch::empty({n});
    group->recv(into, 0, 4);
    check(torch::equal(into, input_of(0, n, 3)), "the group's message", 1);
  } else {
    comm.barrier();
  }
}

// The rings' counter samples (comm/shm_links.hpp: "shm ring S->D (...)",
// head, tail, capacity) while rank 0 sends rank 1 messages of several
// sizes, traced in memory. Run with two copies and a small ring, so the
// large ones go round it many times. Each side checks its own samples:
// the ring never holds more than its capacity nor less than nothing, the
// side's own index never goes back, and at the end the sender's head and
// the receiver's tail both count every byte: the payloads plus a 48-byte
// header (6 words: tag, dtype, elements, bytes, address, ack) a message.
void ring_trace(Communicator& comm) {
  const int me = comm.rank();
  auto sink = std::make_shared<distlab::trace::MemorySink>();
  comm.recorder()->add_sink(sink);
  const std::vector<int64_t> floats = {1 << 18, 3, 0, 100000};
  int64_t payload = 0;
  for (int64_t n : floats) {
    payload += n * 4;
    if (me == 0) comm.send(input_of(0, n, 9), 1, 2);
    if (me == 1) {
      auto into = torch::empty({n});
      comm.recv(into, 0, 2);
      check(torch::equal(into, input_of(0, n, 9)), "a traced message", 1);
    }
  }
  comm.barrier();
  const int64_t all = payload + 48 * static_cast<int64_t>(floats.size());
  int64_t samples = 0, last_head = -1, last_tail = -1, capacity = 0, most = 0;
  bool wrapped = false;
  for (const auto& e : sink->events()) {
    if (!e.is_counter() || e.name.rfind("shm ring 0->1 (world ", 0) != 0) continue;
    const int64_t head = std::stoll(e.arg("head", "-1")), tail = std::stoll(e.arg("tail", "-1"));
    capacity = std::stoll(e.arg("capacity", "0"));
    check(e.rank == me, "a sample recorded on another rank", me);
    check(tail >= 0 && head >= tail && head - tail <= capacity, "a sample with head " + std::to_string(head) +
                                                                    ", tail " + std::to_string(tail), me);
    check(me == 0 ? head >= last_head : tail >= last_tail, "the side's own index went back", me);
    last_head = head;
    last_tail = tail;
    most = std::max(most, head - tail);
    wrapped = wrapped || head > capacity;
    ++samples;
  }
  check(samples > 0 && capacity == 64 << 10, "samples of a 64 KiB ring", me);
  check((me == 0 ? last_head : last_tail) == all, "every byte counted: " + std::to_string(me == 0 ? last_head : last_tail) +
                                                      " against " + std::to_string(all), me);
  check(wrapped, "the ring went round", me);
  check(me != 0 || most > 0, "the sender's samples show bytes in flight", me);
  std::cout << "rank " << me << ": " << samples << " samples of ring 0->1, " << (me == 0 ? "head" : "tail")
            << " at the end " << (me == 0 ? last_head : last_tail) << " bytes, at most " << most << " in flight"
            << std::endl;
  std::cout << "rank " << me << " of " << comm.size() << ": " << (failures == 0 ? "all checks passed" : "FAILED")
            << std::endl;
}

// A small job that must run after a faulty one on the same host: an
// all-reduce in the arena and a message round the ranks, each checked.
void agree(Communicator& comm) {
  const int p = comm.size(), me = comm.rank();
  at::Tensor want = input_of(0, 1000, 3, at::kDouble);
  for (int r = 1; r < p; ++r) want += input_of(r, 1000, 3, at::kDouble);
  at::Tensor t = input_of(me, 1000, 3, at::kDouble);
  comm.native_all_reduce(t, ReduceOp::kSum);
  check(torch::equal(t, want), "all_reduce", me);
  const int next = (me + 1) % p, prev = (me + p - 1) % p;
  distlab::comm::WorkPtr sent = comm.isend(input_of(me, 1000, 7), next, 8);
  at::Tensor in = torch::empty({1000});
  comm.recv(in, prev, 8);
  sent->wait();
  check(torch::equal(in, input_of(prev, 1000, 7)), "the message from rank " + std::to_string(prev), me);
  comm.barrier();
  std::cout << "rank " << me << " of " << p << ": " << (failures == 0 ? "all checks passed" : "FAILED") << std::endl;
}

// Two jobs on one host, each proving the other was running at the same
// time: once every rank of this job is connected, rank 0 creates `started`
// and waits (at most the timeout) for the other job's file, `awaited`; only
// then does either job go on. Every rank prints its job's salt.
void meet_other_job(Communicator& comm, const std::string& started, const std::string& awaited) {
  std::cout << "rank " << comm.rank() << ": job salt " << job_salt << std::endl;
  comm.barrier();
  if (comm.rank() == 0) {
    std::ofstream(started) << job_salt << std::endl;
    const auto deadline = std::chrono::steady_clock::now() + comm.timeout();
    while (!std::filesystem::exists(awaited)) {
      if (std::chrono::steady_clock::now() >= deadline)
        throw distlab::comm::TimeoutError("rank 0: job salt " + std::to_string(job_salt) + ": " + awaited +
                                          " did not appear within " + std::to_string(comm.timeout().count()) +
                                          " ms: the other job is not running");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::cout << "rank 0: job salt " << job_salt << " met the other job" << std::endl;
  }
  comm.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A rank of the gloo tests"};
  distlab::comm::JobOptions job;
  job.backend = "gloo";
  distlab::comm::add_job_flags(app, job);
  std::string scenario = "exchange";
  app.add_option("--scenario", scenario,
                 "exchange | agree | silent-peer | crash | person-wait | mismatch | settle | ring-trace; the "
                 "same-host transport's faults (shm_fault_scenarios.hpp): killed | killed-in-setup | killed-before-page | "
                 "collective-fault | table-mismatch")
      ->check(CLI::IsMember({"exchange", "agree", "silent-peer", "crash", "person-wait", "mismatch", "settle",
                             "ring-trace", "killed", "killed-in-setup", "killed-before-page", "collective-fault",
                             "table-mismatch"}));
  std::string collective = "arena", fault = "kill";
  app.add_option("--collective", collective, "collective-fault: arena | one-copy | parts")
      ->check(CLI::IsMember({"arena", "one-copy", "parts"}));
  app.add_option("--fault", fault, "collective-fault: kill | stop")->check(CLI::IsMember({"kill", "stop"}));
  app.add_option("--salt", job_salt, "add 100 x this to every value the job sends");
  std::string started, awaited;
  app.add_option("--started", started, "rank 0 creates this file once every rank of the job is connected ...");
  app.add_option("--await", awaited, "... then waits for this one (the other job's) before the scenario runs");
  int jobs = 1;
  app.add_option("--jobs", jobs, "run the scenario as this many jobs, one after the other, in the same processes; "
                                 "rank 0 leaves each job but the last one last")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    const bool faulty = scenario == "killed" || scenario == "killed-in-setup" || scenario == "killed-before-page" ||
                        scenario == "collective-fault";
    if (faulty) {
      const char* rank = std::getenv("RANK");
      const char* size = std::getenv("WORLD_SIZE");
      if (rank == nullptr || size == nullptr) throw std::runtime_error(scenario + " needs RANK and WORLD_SIZE");
      distlab::comm::testing::say_pid(std::stoi(rank));
      if (scenario == "killed-in-setup") distlab::comm::testing::arm_kill_in_setup(std::stoi(rank), std::stoi(size));
      if (scenario == "killed-before-page")
        distlab::comm::testing::arm_kill_before_page(std::stoi(rank), std::stoi(size));
    }
    for (int k = 0; k < jobs; ++k) {
      distlab::comm::run_job(distlab::comm::with_env_defaults(job), [&](Communicator& comm) {
        if (!started.empty() || !awaited.empty()) meet_other_job(comm, started, awaited);
        if (scenario == "exchange") exchange(comm);
        if (scenario == "agree") agree(comm);
        if (scenario == "mismatch") mismatch(comm);
        if (scenario == "settle") settle(comm);
        if (scenario == "ring-trace") ring_trace(comm);
        if (scenario == "killed") distlab::comm::testing::killed_mid_transfer(comm);
        if (scenario == "killed-in-setup" || scenario == "killed-before-page")
          check(false, "the job began though its last rank died setting up", comm.rank());
        if (scenario == "collective-fault") distlab::comm::testing::collective_fault(comm, collective, fault);
        if (scenario == "table-mismatch") distlab::comm::testing::table_mismatch(comm);
        // The others reach the next job's rendezvous while rank 0, which
        // hosts the store, is still in this one: they must not take this
        // job's keys for the next one's.
        if (k + 1 < jobs && comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
        if (scenario == "silent-peer") {
          if (comm.rank() == 0) {
            auto t = torch::empty({4});
            comm.recv(t, comm.size() - 1, 3);  // the last rank never sends
          } else {
            // Stay alive (silent) past rank 0's timeout, so it times out
            // instead of seeing the connection close.
            std::this_thread::sleep_for(2 * comm.timeout());
          }
        }
        if (scenario == "person-wait") {
          // Rank 0 is held three times the timeout (a person reading); the
          // others wait for it, then the job goes on.
          const auto start = std::chrono::steady_clock::now();
          if (comm.rank() == 0) std::this_thread::sleep_for(3 * comm.timeout());
          distlab::comm::wait_for_rank(comm, 0, /*tag=*/77);
          const auto waited =
              std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
          comm.barrier();
          std::cout << "rank " << comm.rank() << " waited " << waited.count() << " ms" << std::endl;
        }
        if (scenario == "crash" && comm.rank() == comm.size() - 1) std::exit(7);
        if (scenario == "crash") {
          auto t = torch::empty({4});
          comm.recv(t, comm.size() - 1, 0);
        }
      });
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
