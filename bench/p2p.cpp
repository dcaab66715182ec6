// distlab-bench p2p: point-to-point latency and bandwidth between rank 0 and
// rank 1 (ping-pong, one-way time = round trip / 2), beside this machine's
// memcpy bandwidth for the same size measured in the same run: no transport
// can move bytes between two ranks of one machine faster than memcpy.
//
//   distlab-bench p2p --backend threads
//   distlab-run --nproc-per-node 2 -- distlab-bench p2p --backend gloo
#include <torch/types.h>

#include <chrono>
#include <cstdio>

#include "bench_registry.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"

namespace distlab::bench {
namespace {

struct P2pOptions {
  comm::JobOptions job;
  SizeSweep sizes{"8", "256M"};
  int factor = 2;
  int iters = 200, warmup = 5;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Fewer iterations for big messages so one row takes about a second.
int iterations_for(int64_t bytes, int max_iters) {
  const int64_t budget = int64_t{1} << 30;
  return static_cast<int>(std::max<int64_t>(3, std::min<int64_t>(max_iters, budget / std::max<int64_t>(bytes, 1))));
}

// The machine's copy bandwidth: a tensor copy, which uses every core for
// large buffers, as the fastest transport between ranks of one machine would.
double memcpy_gbps(int64_t bytes) {
  auto a = torch::ones({bytes}, torch::kUInt8), b = torch::empty({bytes}, torch::kUInt8);
  b.copy_(a);  // touch every page first
  const int iters = iterations_for(bytes, 100000);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) b.copy_(a);
  return bytes * static_cast<double>(iters) / seconds_since(start) / 1e9;
}

void run_rank(comm::Communicator& comm, const P2pOptions& o) {
  if (comm.size() < 2) throw comm::SetupError("p2p needs at least 2 ranks (--ranks 2, or 2 processes)");
  const int64_t lo = o.sizes.min(), hi = o.sizes.max();
  const bool me0 = comm.rank() == 0;
  if (me0)
    std::printf("# distlab-bench p2p: backend %s, %d ranks; rank 0 <-> rank 1 ping-pong, one-way time\n"
                "#%11s %7s %11s %10s %13s %10s %7s\n",
                comm.backend().c_str(), comm.size(), "size", "iters", "time(us)", "bw(GB/s)", "memcpy(GB/s)",
                "bw/memcpy", "#wrong");
  for (int64_t bytes = std::max<int64_t>(lo, 1); bytes <= hi; bytes *= o.factor) {
    const int iters = iterations_for(bytes, o.iters);
    auto opts = torch::TensorOptions().dtype(torch::kUInt8).device(comm.device());
    auto ping = torch::zeros({bytes}, opts), pong = torch::zeros({bytes}, opts);
    comm.barrier();
    if (comm.rank() > 1) continue;
    const int peer = 1 - comm.rank();
    auto round_trip = [&] {
      if (me0) {
        comm.send(ping, peer);
        comm.recv(pong, peer);
      } else {
        comm.recv(pong, peer);
        comm.send(pong, peer);
      }
    };
    for (int i = 0; i < o.warmup; ++i) round_trip();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) round_trip();
    const double one_way = seconds_since(start) / (2.0 * iters);
    // Correctness: a pattern goes there and back, then is compared.
    if (me0) ping.copy_(torch::arange(bytes, torch::kInt64).fmod(251).to(torch::kUInt8));
    round_trip();
    if (!me0) continue;
    const int64_t wrong = pong.ne(ping).sum().item<int64_t>();
    const double bw = bytes / one_way / 1e9;
    const double copy = memcpy_gbps(bytes);
    std::printf("%12s %7d %11.2f %10.3f %13.3f %10.2f %7lld\n", format_size(bytes).c_str(), iters, one_way * 1e6, bw,
                copy, bw / copy, static_cast<long long>(wrong));
    std::fflush(stdout);
  }
}

Registration reg("p2p", "point-to-point latency and bandwidth beside memcpy", [](CLI::App& cmd) {
  auto o = std::make_shared<P2pOptions>();
  o->job.ranks = 2;
  comm::add_job_flags(cmd, o->job);
  o->sizes.add_flags(cmd, "message");
  cmd.add_option("-f,--stepfactor", o->factor, "size multiplier between rows")->check(CLI::Range(2, 1024))
      ->capture_default_str();
  cmd.add_option("-n,--iters", o->iters, "timed round trips per size (fewer for big sizes, ~1 GiB per row)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd.add_option("-w,--warmup_iters", o->warmup, "untimed round trips first")->capture_default_str();
  return [o] {
    comm::run_job(comm::with_env_defaults(o->job), [&](comm::Communicator& comm) { run_rank(comm, *o); });
    return 0;
  };
});

}  // namespace
}  // namespace distlab::bench
