// How lessons 02-05 measure and predict communication. Every rank starts
// together (a barrier) and an operation is done when the slowest rank is
// done, so a time is the maximum over ranks; counts (elements found wrong)
// are summed over ranks. Predictions use the slides' story link (1 MB/s) and,
// with --calibrate, the link measured on this backend. Lesson 02 introduces
// these; lessons 03-05 use them too.
#pragma once

#include <CLI/CLI.hpp>
#include <torch/types.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "collectives/calibrate.hpp"
#include "collectives/collectives.hpp"
#include "comm/communicator.hpp"
#include "comm/job.hpp"

namespace distlab::lessons {

// Runs body() on every rank (all ranks call this) and returns the slowest
// rank's seconds, the same number on every rank.
template <typename Body>
double slowest_rank_seconds(comm::Communicator& comm, Body&& body) {
  comm.barrier();  // nobody starts the clock while another is still busy with the last thing
  const auto start = std::chrono::steady_clock::now();
  body();
  // Work queued on a GPU counts once it is done: copying a value back waits
  // for everything queued before it on the current stream.
  if (comm.device().is_cuda()) torch::zeros({1}, torch::TensorOptions().device(comm.device())).cpu();
  const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto slowest = torch::tensor({mine}, torch::kFloat64).to(comm.device());
  comm.native_all_reduce(slowest, comm::ReduceOp::kMax);
  return slowest.cpu().item<double>();
}

// Seconds per call of body(), the slowest rank's, over `iters` calls after
// one untimed call (first touches, connections, allocations).
template <typename Body>
double seconds_per_call(comm::Communicator& comm, int iters, Body&& body) {
  body();
  return slowest_rank_seconds(comm, [&] {
           for (int i = 0; i < iters; ++i) body();
         }) /
         iters;
}

// One number from each rank, on every rank: element `rank` of a (p,) tensor
// is filled in, and the library's all-gather (lesson 05's ring, from
// point-to-point messages) fills in the others.
inline std::vector<double> one_per_rank(comm::Communicator& comm, double mine) {
  auto table = torch::zeros({comm.size()}, torch::kFloat64);
  table[comm.rank()] = mine;
  table = table.to(comm.device());
  collectives::all_gather(comm, table);
  table = table.cpu();
  return std::vector<double>(table.data_ptr<double>(), table.data_ptr<double>() + comm.size());
}

// The sum over ranks of a count (elements found wrong, say), on every rank.
inline int64_t sum_over_ranks(comm::Communicator& comm, int64_t mine) {
  auto total = torch::tensor({mine}, torch::kInt64).to(comm.device());
  comm.native_all_reduce(total);
  return total.cpu().item<int64_t>();
}

// 35 -> "35.0 s", 0.0042 -> "4.20 ms", 3.1e-5 -> "31.0 us".
inline std::string format_seconds(double s) {
  char text[32];
  if (s >= 1) std::snprintf(text, sizeof text, "%.1f s", s);
  else if (s >= 1e-3) std::snprintf(text, sizeof text, "%.2f ms", s * 1e3);
  else std::snprintf(text, sizeof text, "%.1f us", s * 1e6);
  return text;
}

// The story's numbers, whether to measure this machine's link too, and how
// many timed calls.
struct StoryOptions {
  double mb = 5;             // the data each rank holds or sends, MB (10^6 bytes)
  double link_mb_per_s = 1;  // the story's link
  bool calibrate = false;
  int iters = 5;             // timed calls (lesson 02: rounds, the best is shown)

  int64_t bytes() const { return static_cast<int64_t>(mb * 1e6); }
};

// size_flag: "--mb", or lesson 02's "--file-mb".
inline void add_story_flags(CLI::App& app, StoryOptions& o, const std::string& size_flag,
                            const std::string& size_help) {
  app.add_option(size_flag, o.mb, size_help + ", MB")->check(CLI::Range(1e-5, 4096.0))->capture_default_str();
  app.add_option("--link-mb-per-s", o.link_mb_per_s, "the story's link speed, MB/s")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--calibrate", o.calibrate, "measure latency and bandwidth here and predict with them too");
  app.add_option("--iters", o.iters, "timed calls per algorithm")->check(CLI::Range(1, 10000))->capture_default_str();
}

struct Links {
  collectives::LinkParams story;                // the slides' link
  std::optional<collectives::LinkParams> here;  // measured by calibrate(), if asked for
};

// Every rank calls this: calibrate() is a collective (ranks 0 and 1 play
// ping-pong, then rank 0 tells everybody what it measured).
inline Links links_for(comm::Communicator& comm, const StoryOptions& o) {
  Links links{{/*alpha_s=*/0, /*beta_s_per_byte=*/1 / (o.link_mb_per_s * 1e6)}, std::nullopt};
  if (o.calibrate) links.here = collectives::calibrate(comm, {3, 20, 4 << 20, comm.device()});
  return links;
}

// Runs body(comm) on every rank of the job. A failure ends in one line,
// "program: what went wrong", and exit status 1.
template <typename Body>
int run_lesson(const char* program, const comm::JobOptions& job, Body&& body) {
  try {
    comm::run_job(comm::with_env_defaults(job), body);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  return 0;
}

}  // namespace distlab::lessons
