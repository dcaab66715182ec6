// Lesson 05: all-reduce.
//
// DDP needs the sum of the gradients on every rank. Three ways to get it:
//   reduce_broadcast   lesson 04's tree reduce, then lesson 03's tree
//                      broadcast: 2 ceil(log2 p) steps, each moving the
//                      whole buffer
//   ring               reduce-scatter then all-gather around a ring: 2(p-1)
//                      steps, each moving 1/p of the buffer; every rank
//                      sends 2(p-1)/p of it in all, the least possible
//   halving_doubling   recursive halving then doubling: 2 log2(p) steps,
//                      half, a quarter, ... of the buffer
// Each runs here and is checked element by element against the backend's
// own all-reduce, with algbw and busbw as nccl-tests prints them.
//
//   lesson_05_all_reduce --backend threads --ranks 4
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
  lessons::StoryOptions story{/*mb=*/16};  // each rank's gradient; --link-mb-per-s 1, --calibrate
  std::string op = "sum";
  bool show_steps = true;
};

// Rank r's gradient: whole numbers in [-8, 8] that depend on r and i, so that
// any order of adding gives the same float32 and a misplaced chunk shows.
torch::Tensor gradient_of(int rank, int64_t n) {
  return torch::arange(n, torch::kInt64).add(5 * rank).fmod(17).sub(8).to(torch::kFloat32);
}

void run(comm::Communicator& comm, const Options& o, lessons::Parts& parts) {
  const int p = comm.size(), me = comm.rank();
  const auto op = comm::parse_reduce_op(o.op);
  const int64_t bytes = o.story.bytes();
  const lessons::Links links = lessons::links_for(comm, o.story);

  if (me == 0)
    std::printf("Lesson 05: all-reduce  (%s backend, %s, op %s)\n\n", comm.backend().c_str(),
                comm::counted(p, "rank").c_str(), o.op.c_str());

  parts.begin(comm, "The story");
  if (me == 0) {
    std::printf("1. The story: %d ranks each hold a %g MB gradient and all need the %s; %g MB/s links\n", p,
                o.story.mb, o.op.c_str(), o.story.link_mb_per_s);
    lessons::print_story(Collective::kAllReduce, p, bytes, 0, links.story, o.show_steps && p <= 8);
    std::printf("  Look: c3 is chunk 3 of %d. In the ring every rank sends and receives in every step, a 1/p\n"
                "  chunk each time, so no link idles and nobody carries the whole buffer.\n", p);
  }

  parts.begin(comm, "The library's all-reduces");  // on this machine
  const int64_t n = bytes / 4;
  const auto input = gradient_of(me, n).to(comm.device());
  // The reference: the backend's own all-reduce of the same input.
  auto reference = input.clone();
  collectives::all_reduce(comm, reference, op, Algorithm::kNative);
  auto output = torch::empty_like(input);
  const lessons::AlgorithmTable table(Collective::kAllReduce, p, n, 4, 0, links, /*bandwidth=*/true);
  if (me == 0) {
    std::printf("\n2. The library's all-reduces on this machine: %g MB (%lld float32), %s each; #wrong:\n"
                "   elements, on all ranks, that differ from the %s backend's own all-reduce\n",
                o.story.mb, static_cast<long long>(n), comm::counted(o.story.iters, "call").c_str(),
                comm.backend().c_str());
    table.print_header();
  }
  std::vector<Algorithm> algorithms = collectives::algorithms_for(Collective::kAllReduce);
  algorithms.push_back(Algorithm::kNative);
  std::vector<double> busbw;
  for (Algorithm algorithm : algorithms) {
    // Out of place: `input` stays this rank's gradient, so every call reduces the same data.
    auto call = [&] { collectives::all_reduce(comm, input, output, op, algorithm); };
    call();
    const int64_t wrong = lessons::sum_over_ranks(comm, output.ne(reference).sum().item<int64_t>());
    const double seconds = lessons::seconds_per_call(comm, o.story.iters, call);
    busbw.push_back(bytes / seconds * collectives::bus_bandwidth_factor(Collective::kAllReduce, p));
    if (me == 0) table.print_row(algorithm, seconds, wrong);
  }
  if (me == 0) {
    std::printf("  busbw of each against native:");
    for (size_t a = 0; a + 1 < algorithms.size(); ++a)
      std::printf("  %s %.2f", collectives::to_string(algorithms[a]), busbw[a] / busbw.back());
    char link[64] = " (--calibrate measures it)";
    if (links.here)
      std::snprintf(link, sizeof link, " (%.2f GB/s measured here)", 1e-9 / links.here->beta_s_per_byte);
    std::printf("\n  Look: algbw = bytes / time. busbw = algbw x 2(p-1)/p = %.2f x algbw, the rate each rank's\n"
                "  link must carry for the ring: compare it with the link's own bandwidth%s.\n"
                "  The prediction counts messages only; the additions, and ranks sharing cores, come on top.\n",
                collectives::bus_bandwidth_factor(Collective::kAllReduce, p), link);
    std::printf("\nNext: --ranks 6 (halving-doubling folds the extra ranks in), --op avg, --mb 64, --calibrate,\n"
                "--backend gloo under distlab-run --nproc-per-node 4; then the benchmark:\n"
                "distlab-bench collective --algorithm all.\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  lessons::Parts parts({"The story", "The library's all-reduces"});
  CLI::App app{"Lesson 05: all-reduce (reduce+broadcast, ring, halving-doubling, checked against native)"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  lessons::add_story_flags(app, o.story, "--mb", "each rank's gradient");
  app.add_option("--op", o.op, "sum, avg, max or min")->check(CLI::IsMember({"sum", "avg", "max", "min"}))
      ->capture_default_str();
  app.add_flag_callback("--no-steps", [&o] { o.show_steps = false; }, "leave out the step-by-step plans");
  CLI11_PARSE(app, argc, argv);
  return lessons::run_lesson("lesson_05_all_reduce", o.job, [&](comm::Communicator& comm) { run(comm, o, parts); });
}
