// Lesson 04: reduce.
//
// Every rank holds a gradient; one rank needs their sum. Sequentially the
// root receives p-1 gradients one after another. As a tree, neighbours add
// in pairs first (1->0, 3->2, 5->4, 7->6), then pairs of pairs, and after
// log2(p) steps the root has everything: 3 steps for the slides' 8 ranks.
// The library's reduce runs both (and the backend's own), checked against a
// sum computed independently on the root.
//
//   lesson_04_reduce --backend threads --ranks 8
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "compare.hpp"
#include "collectives/collectives.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "comm/plural.hpp"
#include "lesson.hpp"
#include "over_ranks.hpp"

using namespace distlab;
using collectives::Algorithm;
using collectives::Collective;
using lessons::format_seconds;

namespace {

struct Options {
  comm::JobOptions job;
  lessons::StoryOptions story;  // --mb 5 (each rank's gradient), --link-mb-per-s 1, --calibrate
  int root = 0;
  std::string op = "sum";
};

// Rank r's gradient: (r + 1) * v, with v = (i mod 13) - 6. Whole numbers, so
// every order of adding gives exactly the same float32 result.
torch::Tensor pattern(int64_t n) { return torch::arange(n, torch::kInt64).fmod(13).sub(6).to(torch::kFloat32); }
torch::Tensor gradient_of(int rank, const torch::Tensor& v) { return v * static_cast<float>(rank + 1); }

// What the root must end up with, from every rank's gradient (each rank
// can compute them all), with torch's own reductions.
torch::Tensor expected_result(int p, const torch::Tensor& v, comm::ReduceOp op) {
  std::vector<torch::Tensor> all;
  for (int r = 0; r < p; ++r) all.push_back(gradient_of(r, v));
  const auto stacked = torch::stack(all);  // (p, n)
  switch (op) {
    case comm::ReduceOp::kMax: return std::get<0>(stacked.max(0));
    case comm::ReduceOp::kMin: return std::get<0>(stacked.min(0));
    case comm::ReduceOp::kAvg: return stacked.sum(0) / static_cast<float>(p);
    default: return stacked.sum(0);
  }
}

void show_story(int p, int64_t bytes, int root, const collectives::LinkParams& story) {
  lessons::print_story(Collective::kReduce, p, bytes, root, story, /*show_steps=*/true);
  std::printf("  Steps as the job grows (p-1 against ceil(log2 p)):\n      %-12s", "ranks");
  const std::vector<int> sizes{2, 4, 8, 16, 32, 64, 128, 256};
  for (int n : sizes) std::printf(" %5d", n);
  for (Algorithm algorithm : {Algorithm::kSequential, Algorithm::kTree}) {
    std::printf("\n      %-12s", collectives::to_string(algorithm));
    for (int n : sizes)
      std::printf(" %5zu", collectives::make_plan(Collective::kReduce, algorithm, n, 1).steps.size());
  }
  std::printf("\n");
}

void run(comm::Communicator& comm, const Options& o, lessons::Parts& parts) {
  const int p = comm.size(), me = comm.rank();
  if (o.root >= p)
    throw comm::SetupError("--root " + std::to_string(o.root) + " is not a rank of a job of " + std::to_string(p));
  const auto op = comm::parse_reduce_op(o.op);
  const int64_t bytes = o.story.bytes();
  const lessons::Links links = lessons::links_for(comm, o.story);

  if (me == 0)
    std::printf("Lesson 04: reduce  (%s backend, %s, root %d, op %s)\n\n", comm.backend().c_str(),
                comm::counted(p, "rank").c_str(), o.root, o.op.c_str());

  parts.begin(comm, "The story");
  if (me == 0) {
    std::printf("1. The story: %d ranks each hold a %g MB gradient; rank %d needs their %s; %g MB/s links\n", p,
                o.story.mb, o.root, o.op.c_str(), o.story.link_mb_per_s);
    show_story(p, bytes, o.root, links.story);
    std::printf("  Look: in the tree each step halves the ranks still holding a partial %s.\n", o.op.c_str());
  }

  parts.begin(comm, "The library's reduces");  // on this machine
  const int64_t n = bytes / 4;
  const auto v = pattern(n);
  const auto input = gradient_of(me, v).to(comm.device());
  const auto expected = expected_result(p, v, op).to(comm.device());
  auto output = torch::empty_like(input);
  const lessons::AlgorithmTable table(Collective::kReduce, p, n, 4, o.root, links, /*bandwidth=*/false);
  if (me == 0) {
    std::printf("\n2. The library's reduces on this machine: %g MB (%lld float32) per rank to rank %d, %s each;\n"
                "   #wrong: elements of the root's result that differ from torch's own %s of all gradients\n",
                o.story.mb, static_cast<long long>(n), o.root, comm::counted(o.story.iters, "call").c_str(),
                o.op.c_str());
    table.print_header();
  }
  std::vector<double> measured;
  for (Algorithm algorithm : {Algorithm::kSequential, Algorithm::kTree, Algorithm::kNative}) {
    // Out of place: `input` stays this rank's gradient, so every call reduces the same data.
    auto call = [&] { collectives::reduce(comm, input, output, o.root, op, algorithm); };
    call();
    const int64_t wrong =
        lessons::sum_over_ranks(comm, me == o.root ? output.ne(expected).sum().item<int64_t>() : 0);
    measured.push_back(lessons::seconds_per_call(comm, o.story.iters, call));
    if (me == 0) table.print_row(algorithm, measured.back(), wrong);
  }
  if (me == 0) {
    std::printf("  sequential / tree: %.2f measured\n", measured[0] / measured[1]);
    std::printf("  Look: the tree's root receives ceil(log2 p) gradients instead of p-1, and the additions\n"
                "  are spread over the ranks. On one machine the ranks also share the cores that add.\n");
    std::printf("\nNext: --ranks 5 (the tree with an odd rank out), --root 3, --op max, --calibrate, --mb 50,\n"
                "--backend gloo under distlab-run; then lesson 05: all-reduce, the sum on every rank.\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.job.ranks = 8;  // the slides' 8 ranks
  lessons::Parts parts({"The story", "The library's reduces"});
  CLI::App app{"Lesson 04: reduce (sequential vs tree, log2(p) steps)"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  lessons::add_story_flags(app, o.story, "--mb", "each rank's gradient");
  app.add_option("--root", o.root, "the rank that receives the result")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--op", o.op, "sum, avg, max or min")->check(CLI::IsMember({"sum", "avg", "max", "min"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return lessons::run_lesson("lesson_04_reduce", o.job, [&](comm::Communicator& comm) { run(comm, o, parts); });
}
