// Lesson 02: point-to-point communication.
//
// The slides' story: you must send a 5 MB file to 7 friends and your upload
// is 1 MB/s. One friend after another takes 7 x 5 s = 35 s; sending to all
// at once splits the 1 MB/s seven ways (143 KB/s each) and still takes 35 s.
// The cost model says so, then real sends on this machine say what they
// say: rank 0 is you, ranks 1..p-1 are the friends.
//
// Part 3, the wire, is for processes: the same message over TCP, through
// shared memory in two copies and in one, beside memcpy.
//
//   lesson_02_point_to_point --backend threads --ranks 8
//   lesson_02_point_to_point --backend threads --ranks 8 --calibrate
//   distlab-run --nproc-per-node 2 -- lesson_02_point_to_point --backend auto
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/cost_model.hpp"
#include "comm/env.hpp"
#include "comm/gloo_backend.hpp"
#include "comm/job.hpp"
#include "comm/same_host_backend.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "lesson.hpp"
#include "over_ranks.hpp"
#include "story.hpp"
#include "timing.hpp"

using namespace distlab;
using collectives::LinkParams;
using lessons::format_seconds;

namespace {

struct Options {
  comm::JobOptions job;
  lessons::StoryOptions story;  // --file-mb 5, --link-mb-per-s 1, --calibrate
};

// The story as the cost model sees it: one step per friend (the sequential
// broadcast plan), or one step in which rank 0 sends to everybody at once.
collectives::Plan one_after_another(int world_size, int64_t bytes) {
  return collectives::make_plan(collectives::Collective::kBroadcast, collectives::Algorithm::kSequential, world_size,
                                bytes, /*root=*/0, /*elem_bytes=*/1);
}

collectives::Step all_at_once(int world_size, int64_t bytes) {
  collectives::Step step{"broadcast", {}};
  for (int dst = 1; dst < world_size; ++dst) step.transfers.push_back({0, dst, -1, 1, {0, bytes}, false});
  return step;
}

// Cumulative seconds until friend f has the file, one after another (the
// sequential plan), then the time for all at once as the last entry.
std::vector<double> predicted_times(int world_size, int64_t bytes, const LinkParams& link) {
  const auto sequential = collectives::predict(one_after_another(world_size, bytes), link);
  std::vector<double> done;
  double t = 0;
  for (double step : sequential.step_seconds) done.push_back(t += step);
  done.push_back(collectives::predict_step(all_at_once(world_size, bytes), world_size, 1, link));
  return done;
}

// What a friend should receive: byte i of the file is i mod 251.
torch::Tensor the_file(int64_t bytes) { return torch::arange(bytes, torch::kInt64).fmod(251).to(torch::kUInt8); }

// One round of one after another: rank 0 sends to friend 1 and waits until
// it has the file, then friend 2, ... Returns the seconds from the start
// until each friend has it (rank 0's clock) and, last, the slowest rank's
// time for the whole round.
std::vector<double> one_after_another_round(comm::Communicator& comm, const torch::Tensor& file, torch::Tensor& inbox) {
  std::vector<double> done;
  const double all = lessons::slowest_rank_seconds(comm, [&] {
    if (comm.rank() != 0) return comm.recv(inbox, 0);
    const auto start = std::chrono::steady_clock::now();
    for (int f = 1; f < comm.size(); ++f) {
      comm.send(file, f);
      done.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  });
  done.push_back(all);
  return done;
}

// One round of all at once: isend to everybody, then wait for all.
double all_at_once_round(comm::Communicator& comm, const torch::Tensor& file, torch::Tensor& inbox) {
  return lessons::slowest_rank_seconds(comm, [&] {
    if (comm.rank() != 0) return comm.recv(inbox, 0);
    std::vector<comm::WorkPtr> sends;
    for (int f = 1; f < comm.size(); ++f) sends.push_back(comm.isend(file, f));  // all on their way...
    for (auto& s : sends) s->wait();                                             // ...before waiting for any
  });
}

// Bytes of the file that the friends received wrong, summed over ranks:
// every friend checks its copy byte by byte.
int64_t received_wrong(comm::Communicator& comm, const torch::Tensor& inbox, int64_t bytes) {
  return lessons::sum_over_ranks(comm, comm.rank() == 0 ? 0 : inbox.cpu().ne(the_file(bytes)).sum().item<int64_t>());
}

// 3. The wire. One way, rank 0 to rank 1: half the best of `rounds` round
// trips of the message (after one to warm up); the other ranks wait.
double one_way_seconds(comm::Communicator& comm, torch::Tensor& message, int rounds) {
  double best = 0;
  for (int r = 0; r <= rounds; ++r) {
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    if (comm.rank() == 0) {
      comm.send(message, 1);
      comm.recv(message, 1);
    } else if (comm.rank() == 1) {
      comm.recv(message, 0);
      comm.send(message, 0);
    }
    const double one_way = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 2;
    if (r == 1 || (r > 1 && one_way < best)) best = one_way;
  }
  return best;
}

// One memcpy of `bytes` in one process, best of `rounds`: the ceiling.
double memcpy_seconds(int64_t bytes, int rounds) {
  std::vector<uint8_t> from(bytes, 1), to(bytes, 0);
  double best = 0;
  for (int r = 0; r <= rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r == 1 || (r > 1 && s < best)) best = s;
  }
  return best;
}

// The same message by every route these processes have: each route is a
// communicator of its own over the same job (every rank makes them, in the
// same order). The shared-memory routes read DISTLAB_SHM_SINGLE_COPY when
// they are made.
void the_wire(comm::Communicator& comm, const Options& o, int64_t bytes) {
  const int me = comm.rank();
  const double copy = memcpy_seconds(bytes, o.story.iters);
  auto row = [&](const char* what, double s) {
    std::printf("  %-32s %12s %9.2f %10.2f\n", what, format_seconds(s).c_str(), bytes / s / 1e9, copy / s);
  };
  if (me == 0) {
    std::printf("\n3. The wire: one %g MB message from rank 0 to rank 1, by every route\n", o.story.mb);
    std::printf("  %-32s %12s %9s %10s\n", "", "one way", "GB/s", "x memcpy");
    row("memcpy, inside one process", copy);
  }
  if (comm.backend() == "threads" || comm.backend() == "nccl") {
    if (me == 0)
      std::printf(
          "  Thread ranks share one process: a send is that memcpy. Run it as processes to see the wire:\n"
          "  distlab-run --nproc-per-node 2 -- lesson_02_point_to_point --backend auto\n");
    return;
  }
  const comm::WorldInfo world = comm::world_from_env();
  comm::CommOptions options;
  options.timeout = comm.timeout();
  options.connect_timeout = comm.connect_timeout();
  options.recorder = comm.recorder_ptr();  // --trace: the rings' head and tail too (distlab-viz --panel wire)
  const char* old = std::getenv("DISTLAB_SHM_SINGLE_COPY");
  const std::string before = old != nullptr ? old : "";
  struct Route {
    const char* name;
    const char* single_copy;  // DISTLAB_SHM_SINGLE_COPY while it is made; null: gloo
  };
  for (const Route& route : {Route{"TCP (gloo), through the kernel", nullptr}, Route{"shared memory, two copies", "0"},
                             Route{"shared memory, one copy", "1"}}) {
    if (route.single_copy != nullptr) setenv("DISTLAB_SHM_SINGLE_COPY", route.single_copy, 1);
    std::unique_ptr<comm::Communicator> wire = route.single_copy == nullptr
                                                   ? comm::make_gloo_communicator(world, options)
                                                   : comm::make_same_host_communicator(world, options);
    torch::Tensor message = me == 0 ? the_file(bytes) : torch::zeros({bytes}, torch::kUInt8);
    const double s = one_way_seconds(*wire, message, o.story.iters);
    const bool intact = me != 0 || torch::equal(message, the_file(bytes));
    if (me == 0) row(route.name, s);
    if (!intact) throw std::runtime_error(std::string("lesson 02: the message came back different over ") + route.name);
  }
  if (old != nullptr)
    setenv("DISTLAB_SHM_SINGLE_COPY", before.c_str(), 1);
  else
    unsetenv("DISTLAB_SHM_SINGLE_COPY");
  if (me != 0) return;
  std::printf(
      "\n  Two copies: rank 0 copies into a ring in shared memory while rank 1 copies out of it:\n"
      "      rank 0's tensor --copy in--> [ header | bytes | bytes | ... ] --copy out--> rank 1's tensor\n"
      "                                    head: rank 0 writes   tail: rank 1 reads\n"
      "  One copy: rank 1 reads rank 0's tensor straight out of rank 0's memory (process_vm_readv).\n"
      "  TCP: the kernel copies into a socket and out of it again, in pieces, and wakes the receiver.\n");
}

void run(comm::Communicator& comm, const Options& o, lessons::Parts& parts) {
  const int p = comm.size(), me = comm.rank();
  if (p < 2) throw comm::SetupError("lesson 02 needs at least 2 ranks: you and a friend (--ranks 8)");
  const int64_t bytes = o.story.bytes();
  const lessons::Links links = lessons::links_for(comm, o.story);
  const auto story_times = predicted_times(p, bytes, links.story);
  const auto here_times = predicted_times(p, bytes, links.here.value_or(LinkParams{}));
  auto row = [&](const std::string& what, size_t i, double measured) {
    std::printf("  %-30s %14s %16s %12s\n", what.c_str(), format_seconds(story_times[i]).c_str(),
                links.here ? format_seconds(here_times[i]).c_str() : "-", format_seconds(measured).c_str());
  };
  auto header = [] { std::printf("  %-30s %14s %16s %12s\n", "", "story", "predicted here", "measured"); };

  if (me == 0) {
    std::printf("Lesson 02: point-to-point  (%s backend, %d ranks: rank 0 is you, %d friends)\n\n",
                comm.backend().c_str(), p, p - 1);
    std::printf("Send a %g MB file to %d friends. The story's link is %g MB/s; ", o.story.mb, p - 1,
                o.story.link_mb_per_s);
    if (links.here)
      std::printf("the link measured here has\nlatency %s and %.2f GB/s. ", format_seconds(links.here->alpha_s).c_str(),
                  1e-9 / links.here->beta_s_per_byte);
    else
      std::printf("add --calibrate to predict\nfor the link measured here. ");
    std::printf("Measured: real sends, best of %s.\n", comm::counted(o.story.iters, "round").c_str());
  }

  const auto options = torch::TensorOptions().dtype(torch::kUInt8).device(comm.device());
  const torch::Tensor file = me == 0 ? the_file(bytes).to(comm.device()) : torch::Tensor();
  torch::Tensor inbox = torch::zeros({bytes}, options);

  parts.begin(comm, "One after another");
  one_after_another_round(comm, file, inbox);  // warm-up: connections made, pages touched
  std::vector<double> sequential;              // the best round: each friend's time, then the whole round's
  for (int r = 0; r < o.story.iters; ++r) {
    const auto round = one_after_another_round(comm, file, inbox);
    if (r == 0 || round.back() < sequential.back()) sequential = round;
  }
  int64_t wrong = received_wrong(comm, inbox, bytes);
  if (me == 0) {
    std::printf("\n1. One after another: send to a friend, wait until it has the file, then the next friend\n");
    header();
    for (int f = 1; f < p; ++f) row("  friend " + std::to_string(f) + " has the file after", f - 1, sequential[f - 1]);
  }

  parts.begin(comm, "All at once");
  inbox.zero_();
  all_at_once_round(comm, file, inbox);
  double together = 0;
  for (int r = 0; r < o.story.iters; ++r) {
    const double round = all_at_once_round(comm, file, inbox);
    if (r == 0 || round < together) together = round;
  }
  wrong += received_wrong(comm, inbox, bytes);
  if (me == 0) {
    std::printf("\n2. All at once: isend to every friend, then wait for all\n");
    header();
    row("all at once (isend to all)", p - 1, together);
    std::printf("\n  bytes the friends received wrong: %lld\n", static_cast<long long>(wrong));
    std::printf(
        "  Look: one after another grows by one send per friend: %d friends, %d sends' time.\n"
        "  All at once took %.2f x as long as one after another here. In the story it is no faster\n"
        "  because one uplink is shared; ranks on one machine share its cores and memory bandwidth\n"
        "  instead, and either way the sender sends every byte %d times.\n",
        p - 1, p - 1, together / sequential.back(), p - 1);
  }

  parts.begin(comm, "The wire");
  the_wire(comm, o, bytes);
  if (me == 0)
    std::printf(
        "\nNext: --calibrate, --file-mb 50, --backend auto under distlab-run --nproc-per-node 8;\n"
        "then lesson 03: a broadcast in which the friends pass the file on.\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.job.ranks = 8;  // you and 7 friends
  lessons::Parts parts({"One after another", "All at once", "The wire"});
  CLI::App app{"Lesson 02: point-to-point (send a 5 MB file to 7 friends)"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  o.story.iters = 3;  // rounds of real sends, the best shown
  lessons::add_story_flags(app, o.story, "--file-mb", "size of the file");
  CLI11_PARSE(app, argc, argv);
  return lessons::run_lesson("lesson_02_point_to_point", o.job, [&](comm::Communicator& comm) { run(comm, o, parts); });
}
