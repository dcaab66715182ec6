// Lesson 03: broadcast.
//
// Lesson 02's file again, 5 MB from rank 0 to 7 ranks at 1 MB/s, but now a
// rank that has the file passes it on: after step 1 two ranks have it, after
// step 2 four, after step 3 eight. 3 steps of 5 s: 15 s instead of 35 s (a
// binomial tree, ceil(log2 p) steps). Then the same on this machine, and the
// broadcast DDP starts with: rank 0's initial weights sent to every rank.
//
//   lesson_03_broadcast --backend threads --ranks 8
#include <ATen/CPUGeneratorImpl.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "collectives/collectives.hpp"
#include "comm/plural.hpp"
#include "compare.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "lesson.hpp"
#include "over_ranks.hpp"

using namespace distlab;
using collectives::Algorithm;
using collectives::Collective;
using lessons::format_seconds;

namespace {

struct Options {
  comm::JobOptions job;
  lessons::StoryOptions story;  // --mb 5 (the file, part 3's tensor), --link-mb-per-s 1, --calibrate
  int root = 0;
};

// The binomial tree by hand, root 0, plain send and recv: in each step the
// ranks that have the data (0 .. distance-1) send it `distance` further on.
// This is the loop the library's Algorithm::kTree runs, written as a Plan
// (lib/collectives/plan_rooted.cpp) so that any root works and each step is
// traced. Returns the step (1, 2, ...) in which this rank received.
int tree_broadcast_by_hand(comm::Communicator& comm, torch::Tensor& tensor) {
  const int p = comm.size(), me = comm.rank();
  int received_in = 0, step = 0;
  for (int distance = 1; distance < p; distance *= 2) {
    ++step;
    if (me < distance && me + distance < p) {
      comm.send(tensor, me + distance);  // I have it: pass it on
    } else if (me >= distance && me < 2 * distance) {
      comm.recv(tensor, me - distance);  // my turn to get it
      received_in = step;
    }
  }
  return received_in;
}

// Root's data: element i is i mod 997 (the others start from zeros).
torch::Tensor root_data(int64_t n) { return torch::arange(n, torch::kInt64).fmod(997).to(torch::kFloat32); }

// A small model's parameters, initialised at random with this rank's seed,
// so that every rank starts different (as separate processes would).
std::vector<torch::Tensor> init_weights(int rank, at::Device device) {
  auto generator = at::detail::createCPUGenerator(/*seed_in=*/1000 + rank);
  std::vector<torch::Tensor> weights;
  for (auto shape : {std::vector<int64_t>{64, 32}, {64}, {10, 64}, {10}})  // linear1 (W, b), linear2 (W, b)
    weights.push_back(at::randn(shape, generator, torch::kFloat32).to(device));
  return weights;
}

double checksum(const std::vector<torch::Tensor>& weights) {
  double sum = 0;
  for (const auto& w : weights) sum += w.sum().item<double>();
  return sum;
}

void run(comm::Communicator& comm, const Options& o, lessons::Parts& parts) {
  const int p = comm.size(), me = comm.rank();
  if (o.root >= p)
    throw comm::SetupError("--root " + std::to_string(o.root) + " is not a rank of a job of " + std::to_string(p));
  const int64_t bytes = o.story.bytes();
  const lessons::Links links = lessons::links_for(comm, o.story);

  if (me == 0)
    std::printf("Lesson 03: broadcast  (%s backend, %s, root %d)\n\n", comm.backend().c_str(),
                comm::counted(p, "rank").c_str(), o.root);

  parts.begin(comm, "The story");
  if (me == 0) {
    std::printf("1. The story: %g MB from rank %d to %d ranks at %g MB/s (cost model)\n", o.story.mb, o.root,
                p - 1, o.story.link_mb_per_s);
    lessons::print_story(Collective::kBroadcast, p, bytes, o.root, links.story, /*show_steps=*/true);
    std::printf("  Look: in the tree every rank that has the file sends it on: the senders double each step.\n");
  }

  parts.begin(comm, "The tree by hand");  // on a few numbers
  auto numbers = me == 0 ? torch::tensor({3.f, 1.f, 4.f, 1.f, 5.f}) : torch::zeros({5});
  numbers = numbers.to(comm.device());
  const auto received_in = lessons::one_per_rank(comm, tree_broadcast_by_hand(comm, numbers));
  const int64_t hand_wrong = lessons::sum_over_ranks(
      comm, numbers.cpu().ne(torch::tensor({3.f, 1.f, 4.f, 1.f, 5.f})).sum().item<int64_t>());
  if (me == 0) {
    // The step in which the library's tree plan (root 0) delivers to each rank.
    std::vector<int> plan_step(p, 0);
    const auto plan = collectives::make_plan(Collective::kBroadcast, Algorithm::kTree, p, 5, /*root=*/0);
    for (size_t s = 0; s < plan.steps.size(); ++s)
      for (const auto& t : plan.steps[s].transfers) plan_step[t.dst] = static_cast<int>(s) + 1;
    std::printf("\n2. The tree by hand (tree_broadcast_by_hand in this file), root 0, five numbers:\n");
    std::printf("    %-30s", "rank:");
    for (int r = 1; r < p; ++r) std::printf(" %2d", r);
    std::printf("\n    %-30s", "got them in step:");
    for (int r = 1; r < p; ++r) std::printf(" %2d", static_cast<int>(received_in[r]));
    std::printf("\n    %-30s", "the library's tree plan says:");
    for (int r = 1; r < p; ++r) std::printf(" %2d", plan_step[r]);
    std::printf("\n    wrong elements on all ranks: %lld\n", static_cast<long long>(hand_wrong));
  }

  parts.begin(comm, "The library's broadcasts");  // on this machine
  const int64_t n = bytes / 4;
  const auto expected = root_data(n).to(comm.device());
  const lessons::AlgorithmTable table(Collective::kBroadcast, p, n, 4, o.root,
                                      links, /*bandwidth=*/false);
  if (me == 0) {
    std::printf("\n3. The library's broadcasts on this machine: %g MB (%lld float32) from rank %d, %s each:\n",
                o.story.mb, static_cast<long long>(n), o.root, comm::counted(o.story.iters, "call").c_str());
    table.print_header();
  }
  std::vector<double> measured;
  for (Algorithm algorithm : {Algorithm::kSequential, Algorithm::kTree, Algorithm::kNative}) {
    auto buffer = me == o.root ? expected.clone() : torch::zeros({n}, expected.options());
    collectives::broadcast(comm, buffer, o.root, algorithm);
    const int64_t wrong = lessons::sum_over_ranks(comm, buffer.ne(expected).sum().item<int64_t>());
    auto call = [&] { collectives::broadcast(comm, buffer, o.root, algorithm); };
    measured.push_back(lessons::seconds_per_call(comm, o.story.iters, call));
    if (me == 0) table.print_row(algorithm, measured.back(), wrong);
  }
  if (me == 0) {
    const int tree_steps = static_cast<int>(
        collectives::make_plan(Collective::kBroadcast, Algorithm::kTree, p, n, o.root, 4).steps.size());
    std::printf("  sequential / tree: %.2f measured, %.2f in the story (%d steps / %d steps)\n",
                measured[0] / measured[1], static_cast<double>(p - 1) / tree_steps, p - 1, tree_steps);
    std::printf("  Look: both algorithms make p-1 copies of the data; the tree makes up to %d at a time.\n"
                "  That pays when every rank has its own link, as in the story or on a cluster. Where the\n"
                "  measured ratio stays far below the story's, the ranks share one machine's cores and\n"
                "  memory bus: copies made at the same time are no faster than one after another.%s\n",
                p / 2, links.here ? "" : "\n  Add --calibrate to predict for the link measured here.");
  }

  parts.begin(comm, "Initial weights from the root");  // DDP's first step: every rank starts from them
  auto weights = init_weights(me, comm.device());
  const auto before = lessons::one_per_rank(comm, checksum(weights));
  for (auto& w : weights) collectives::broadcast(comm, w, o.root, Algorithm::kTree);
  const auto after = lessons::one_per_rank(comm, checksum(weights));
  if (me == 0) {
    std::printf("\n4. Initial weights from the root (linear 32->64->10), each rank seeded differently, broadcast from "
                "rank %d:\n", o.root);
    std::printf("  %6s %22s %22s\n", "rank", "sum of weights before", "sum of weights after");
    for (int r = 0; r < p; ++r) std::printf("  %6d %22.6f %22.6f\n", r, before[r], after[r]);
    std::printf("  Look: after the broadcast every rank holds rank %d's weights: the same model everywhere.\n",
                o.root);
    std::printf("\nNext: --ranks 16 (4 tree steps vs 15), --ranks 6 (not a power of two), --root 3, --calibrate,\n"
                "--backend gloo under distlab-run --nproc-per-node 8; then lesson 04: reduce, the way back.\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.job.ranks = 8;  // the slides' 8 ranks
  lessons::Parts parts({"The story", "The tree by hand", "The library's broadcasts", "Initial weights from the root"});
  CLI::App app{"Lesson 03: broadcast (sequential vs binomial tree; initial weights from rank 0)"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  lessons::add_story_flags(app, o.story, "--mb", "size of the data to broadcast");
  app.add_option("--root", o.root, "the rank that has the data")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return lessons::run_lesson("lesson_03_broadcast", o.job, [&](comm::Communicator& comm) { run(comm, o, parts); });
}
