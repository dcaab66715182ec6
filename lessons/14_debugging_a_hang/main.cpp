// Lesson 14: debugging a hang.
//
// A job that hangs shows itself on every rank as a wait that does not end:
// here, after the communicator's timeout (3 s by default), a TimeoutError
// naming the operation and the peer this rank waited for. That peer is
// often innocent: it waits too, for someone else. The cause is where the
// ranks' records part ways, and the flight recorder (lib/flight) keeps them:
// every rank's last operations, each collective numbered by its group's
// count, alike on every rank, so that all_reduce #5 of group world is the
// same call everywhere. distlab-trace why lines the files up and names the
// rank that skipped, reordered, passed another shape, or died.
//
// The job: --steps DDP steps of an 8 -> 16 -> 1 MLP (tiny_job.hpp), whose
// collectives are numbered
//   #0      broadcast   rank 0's initial weights        "lesson 14 initial weights"
//   #2s-1   all_reduce  step s's gradients (ring)       "lesson 14 step s gradients"
//   #2s     reduce      step s's loss to rank 0 (tree)  "lesson 14 step s loss"
// and --bug puts one fault into --culprit at --at-step (bugs.hpp). The job
// stops within the timeout; each rank says what it saw; then the lesson
// reads the flight files (--flight-dir) and prints the diagnosis, and the
// command to get it yourself. Exit status 1 when the records show a bug.
//
//   lesson_14_debugging_a_hang --backend threads --ranks 4 --bug skip
//   distlab-run --nproc-per-node 4 -- lesson_14_debugging_a_hang --backend gloo --bug dead --culprit 2
//   distlab-trace why /tmp/flight_14       ($TMPDIR/flight_14)
#include <CLI/CLI.hpp>
#include <signal.h>
#include <torch/nn/functional/loss.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ask_for_records.hpp"
#include "bugs.hpp"
#include "comm/plural.hpp"
#include "compat/torch.hpp"
#include "lesson.hpp"
#include "on_sigterm.hpp"
#include "report.hpp"
#include "tiny_job.hpp"
#include "collectives/collectives.hpp"
#include "comm/errors.hpp"
#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "flight/recorder.hpp"
#include "flight/site.hpp"

using namespace distlab;
using collectives::Algorithm;
using lesson14::Bug;

namespace {

constexpr const char* kProgram = "lesson_14_debugging_a_hang";
// How long the reporting process waits for the other ranks' files to come
// by themselves (they come within milliseconds of their own failure), then
// for those it asked for (ask_for_records.hpp).
constexpr std::chrono::milliseconds kOwnFilesWait{500};
constexpr std::chrono::milliseconds kFilesWait{2000};
// A dying rank first lets its last collective's bytes reach the others, so
// that they are all inside the next one when it goes.
constexpr std::chrono::milliseconds kBeforeDying{300};
constexpr const char* kSigtermReason = "SIGTERM (stopped from outside, e.g. by the launcher after another rank failed)";

struct Options {
  comm::JobOptions job;
  std::string bug = "none";
  int culprit = -1;  // -1: the last rank
  int at_step = 3;
  int steps = 5;
  int batch = 32;  // rows of each step, over all ranks
  double lr = 0.3;
  // Not the working directory (a checkout, often): the temporary folder.
  std::string flight_dir = (std::filesystem::temp_directory_path() / "flight_14").string();
};

// What every rank derives from the flags and the world size.
struct Setup {
  Bug bug = Bug::kNone;
  int culprit = -1;
  int step = 0;
  uint64_t seq = 0;   // the collective the bug hits: step's gradient all-reduce
  int reporter = 0;   // on processes, the rank that prints the diagnosis: the lowest that is not the culprit
};

Setup setup_of(const Options& o, int p) {
  Setup s;
  s.bug = lesson14::bug_from_name(o.bug);
  if (o.batch % p != 0)
    throw comm::SetupError("--batch " + std::to_string(o.batch) + " does not split evenly over " + std::to_string(p) +
                           " ranks: pick a multiple of " + std::to_string(p));
  if (s.bug == Bug::kNone) return s;
  if (p < 2) throw comm::SetupError("--bug " + o.bug + " needs at least 2 ranks (--ranks 4)");
  s.culprit = o.culprit < 0 ? p - 1 : o.culprit;
  if (s.culprit >= p)
    throw comm::SetupError("--culprit " + std::to_string(o.culprit) + " is not a rank of this " + std::to_string(p) +
                           "-rank job: pick one of 0.." + std::to_string(p - 1));
  if (o.at_step < 1 || o.at_step > o.steps)
    throw comm::SetupError("--at-step " + std::to_string(o.at_step) + " is not a step of this run: pick one of 1.." +
                           std::to_string(o.steps) + " (--steps)");
  s.step = o.at_step;
  s.seq = lesson14::gradients_seq(o.at_step);
  s.reporter = s.culprit == 0 ? 1 : 0;
  return s;
}

// What a thread rank throws for --bug dead.
class InjectedDeath : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One line, whole, however many thread ranks print at once.
void say(const std::string& line) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::string site_of(int step, const char* what) { return "lesson 14 step " + std::to_string(step) + " " + what; }

// One collective of the job, under its flight site; a failure says the site first.
template <typename F>
void named(const std::string& site, F&& collective) {
  flight::Site here(site);
  try {
    collective();
  } catch (const comm::CommError& e) {
    comm::rethrow_with_context(site + ": ", e);
  }
}

// "waiting in all_reduce #5 (lesson 14 step 3 gradients)", "after reduce #4
// (lesson 14 step 2 loss) completed, ...": where this rank stands, from its own record.
std::string where_it_stands(const flight::Ring* ring) {
  if (ring == nullptr) return "(no flight record)";
  const flight::Dump d = ring->snapshot();
  for (auto it = d.entries.rbegin(); it != d.entries.rend(); ++it)
    if (!it->done()) return "waiting in " + flight::name_of(*it) + " (" + it->site + ")";
  if (d.entries.empty()) return "before any collective";
  const flight::Entry& last = d.entries.back();
  const std::string how = last.state == flight::State::kCompleted ? "completed, in no collective since"
                          : last.state == flight::State::kTimedOut ? "timed out"
                                                                    : "failed";
  return "after " + flight::name_of(last) + " (" + last.site + ") " + how;
}

// The single-process run of the same steps: rank 0's weights, the whole batch.
std::vector<double> one_process_losses(const Options& o) {
  auto model = lesson14::make_model();
  lesson14::fill_weights(model, 0);
  std::vector<double> losses;
  for (int step = 1; step <= o.steps; ++step) {
    const lesson14::Batch b = lesson14::batch_of_step(step, o.batch);
    compat::zero_grad(*model);
    at::Tensor loss = torch::nn::functional::mse_loss(model->forward(b.x), b.y);
    loss.backward();
    lesson14::sgd_step(model, lesson14::flat_gradients(model), o.lr);
    losses.push_back(loss.item<double>());
  }
  return losses;
}

// The culprit's fault, where it strikes: returns true when the rank leaves
// its loop (skip); dead does not return.
bool strike(comm::Communicator& comm, const Setup& s) {
  const std::string who = "  rank " + std::to_string(comm.rank()) + ": --bug " + lesson14::to_string(s.bug) + ": ";
  const std::string at = "#" + std::to_string(s.seq);
  const bool process = comm.backend() != "threads";
  if (s.bug == Bug::kSkip) {
    say(who + "leaves its loop at step " + std::to_string(s.step) + " without all_reduce " + at +
        (process ? ", and stays busy with the rest of its work" : ", and returns from its work"));
    // A process that returned would close its connections and the others
    // would fail at once; one busy elsewhere leaves them waiting, as a hang does.
    if (process) std::this_thread::sleep_for(4 * comm.timeout());
    return true;
  }
  if (s.bug == Bug::kDead) {
    say(who + "dies at step " + std::to_string(s.step) + ", before all_reduce " + at +
        (process ? " (SIGKILL: it writes nothing)" : " (a thread rank throws)"));
    std::this_thread::sleep_for(kBeforeDying);
    if (process) raise(SIGKILL);
    throw InjectedDeath("rank " + std::to_string(comm.rank()) + " died on purpose at step " + std::to_string(s.step) +
                        " (--bug dead)");
  }
  if (s.bug == Bug::kOrder)
    say(who + "reduces its loss before all-reducing its gradients at step " + std::to_string(s.step));
  if (s.bug == Bug::kShape)
    say(who + "all-reduces " + std::to_string(lesson14::kParameters - 1) + " of its " +
        std::to_string(lesson14::kParameters) + " gradient elements at step " + std::to_string(s.step));
  return false;
}

// The job's steps; rank 0 prints each step's loss beside the one-process run's.
void train(comm::Communicator& comm, const Options& o, const Setup& s) {
  const int p = comm.size(), me = comm.rank();
  const std::vector<double> reference = me == 0 ? one_process_losses(o) : std::vector<double>{};
  auto model = lesson14::make_model();
  lesson14::fill_weights(model, me);
  {
    std::vector<at::Tensor> pieces;
    for (const auto& t : model->parameters()) pieces.push_back(t.detach().reshape({-1}));
    // The model stays on the CPU; what the collectives carry goes where the
    // backend keeps its tensors (comm.device(): a GPU under nccl).
    at::Tensor weights = at::cat(pieces).to(comm.device());
    named("lesson 14 initial weights", [&] { collectives::broadcast(comm, weights, /*root=*/0, Algorithm::kTree); });
    torch::NoGradGuard no_grad;
    int64_t offset = 0;
    for (auto& t : model->parameters()) {
      t.copy_(weights.narrow(0, offset, t.numel()).view_as(t));
      offset += t.numel();
    }
  }
  for (int step = 1; step <= o.steps; ++step) {
    const lesson14::Batch mine = lesson14::share_of(lesson14::batch_of_step(step, o.batch), me, p);
    compat::zero_grad(*model);
    at::Tensor loss = torch::nn::functional::mse_loss(model->forward(mine.x), mine.y);
    loss.backward();
    const bool culprit = me == s.culprit && step == s.step;
    if (culprit && strike(comm, s)) return;
    at::Tensor grads =
        lesson14::flat_gradients(model, /*drop_last=*/culprit && s.bug == Bug::kShape).to(comm.device());
    at::Tensor total = loss.detach().reshape({1}).to(comm.device(), /*non_blocking=*/false, /*copy=*/true);
    auto gradients = [&] {
      named(site_of(step, "gradients"), [&] { collectives::all_reduce(comm, grads, comm::ReduceOp::kSum); });
    };
    auto losses = [&] {
      named(site_of(step, "loss"), [&] { collectives::reduce(comm, total, /*root=*/0, comm::ReduceOp::kSum); });
    };
    if (culprit && s.bug == Bug::kOrder) {
      losses();
      gradients();
    } else {
      gradients();
      losses();
    }
    lesson14::sgd_step(model, grads.div_(p).cpu(), o.lr);
    if (me == 0) {
      char line[128];
      std::snprintf(line, sizeof line, "  step %d  loss %.6f   one process, whole batch %.6f", step,
                    total.item<double>() / p, reference[static_cast<size_t>(step - 1)]);
      say(line);
    }
  }
}

void describe(const comm::Communicator& comm, const Options& o, const Setup& s) {
  const int p = comm.size();
  std::printf("Lesson 14: debugging a hang  (%s backend, %s, communicator timeout %lld ms)\n",
              comm.backend().c_str(), comm::counted(p, "rank").c_str(), static_cast<long long>(comm.timeout().count()));
  std::printf("\n1. The job: %s of an 8 -> 16 -> 1 MLP (%lld parameters), %d rows a step, %d per rank\n",
              comm::counted(o.steps, "DDP step").c_str(), static_cast<long long>(lesson14::kParameters), o.batch,
              o.batch / p);
  std::printf("  every rank calls these collectives, each numbered by group world's count:\n"
              "    #0      broadcast   rank 0's initial weights        lesson 14 initial weights\n"
              "    #2s-1   all_reduce  step s's gradients (ring)       lesson 14 step s gradients\n"
              "    #2s     reduce      step s's loss to rank 0 (tree)  lesson 14 step s loss\n");
  if (s.bug == Bug::kNone)
    std::printf("  no bug (--bug skip, order, shape or dead puts one into a rank)\n");
  else
    std::printf("  --bug %s: rank %d %s\n", o.bug.c_str(), s.culprit,
                lesson14::what_it_does(s.bug, s.step, s.seq).c_str());
  std::printf("  flight files: %s/flight.rank<N>.json, written on a timeout, a failure, SIGTERM or SIGUSR1\n",
              o.flight_dir.c_str());
  std::fflush(stdout);
}

// After the diagnosis: did it name what was injected, and the command to
// get it yourself. Returns the exit status: 1 when the records show a bug.
int conclude(const Options& o, const Setup& s, const flight::Diagnosis& d, bool failed) {
  const flight::Finding& first = d.findings.front();
  std::printf("\n");
  if (s.bug != Bug::kNone) {
    const bool found = first.cause == lesson14::to_string(s.bug) && first.culprits == std::vector<int>{s.culprit} &&
                       first.seq == s.seq;
    std::printf("The lesson put '%s' into rank %d at all_reduce #%llu; the diagnosis %s.\n", o.bug.c_str(), s.culprit,
                static_cast<unsigned long long>(s.seq),
                found ? "names that rank, that number and that cause" : "says otherwise: read it above");
  }
  std::printf("Run it yourself: build/launcher/distlab-trace why %s\n", o.flight_dir.c_str());
  std::fflush(stdout);
  return failed || first.cause != "none" ? 1 : 0;
}

// Part 3 on processes, by the reporting rank: the others' files (asking a
// silent rank for its own), then the diagnosis.
int report_on_processes(const Options& o, const Setup& s, int p, int me, lessons::Parts& parts, bool failed) {
  parts.begin_after_job(me, "The diagnosis", /*may_wait=*/false);
  std::printf("\n3. The diagnosis: rank %d reads every rank's flight file\n", me);
  std::vector<int> all(static_cast<size_t>(p)), awaited;
  std::iota(all.begin(), all.end(), 0);
  for (int r : lesson14::wait_for_files(o.flight_dir, all, kOwnFilesWait)) {
    long pid = 0;
    switch (lesson14::ask_for_record(o.flight_dir, r, pid)) {
      case lesson14::Asked::kAsked:
        std::printf("  rank %d has written no file: asked it for one (SIGUSR1 to its pid %ld, as kill -USR1 would)\n",
                    r, pid);
        awaited.push_back(r);
        break;
      case lesson14::Asked::kGone:
        std::printf("  rank %d's process (pid %ld) is gone: no file will come from it\n", r, pid);
        break;
      case lesson14::Asked::kUnknown:
        std::printf("  rank %d has written no file, and is no process of this machine to ask\n", r);
        awaited.push_back(r);
        break;
    }
  }
  const std::vector<int> missing = lesson14::wait_for_files(o.flight_dir, awaited, kFilesWait);
  if (!missing.empty())
    std::printf("  waited %.1f s more; still none from %s\n", static_cast<double>(kFilesWait.count()) / 1000,
                flight::ranks_text(missing).c_str());
  return conclude(o, s, lesson14::print_records_and_diagnosis(o.flight_dir, p), failed);
}

// Who prints the diagnosis on processes: the reporting rank's main thread
// (its own wait failed, or the job ended) or its SIGTERM thread (the
// launcher stopped it first), whichever comes first; the other one holds.
class ReportOnce {
 public:
  bool claim() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (claimed_) return false;
    claimed_ = true;
    return true;
  }
 private:
  std::mutex mutex_;
  bool claimed_ = false;
};

struct Shared {
  std::atomic<bool> training{false};  // a rank of this process began part 2: a failure from now on is diagnosed
  std::atomic<int> status{0};         // processes: the reporting rank's verdict
  ReportOnce report;
};

void run(comm::Communicator& comm, const Options& o, lessons::Parts& parts, Shared& shared) {
  const int p = comm.size(), me = comm.rank();
  const bool process = comm.backend() != "threads";
  const Setup s = setup_of(o, p);
  if (process) {
    // The files of an earlier run would be read as this one's.
    lesson14::remove_old_files(o.flight_dir, [&](int r) { return r != me && (me != 0 || r < p); });
    lesson14::write_pid_file(o.flight_dir, me);
    std::shared_ptr<flight::Ring> ring = comm.flight_ring_ptr();
    lesson14::on_sigterm([o, &parts, &shared, ring, s, p, me] {
      // The reporting rank: whichever of its threads claims the report first prints it.
      const bool reports = me == s.reporter && shared.training;
      if (reports && !shared.report.claim()) return;  // the main thread prints it, then the rank exits
      flight::dump_all(kSigtermReason);
      say("  rank " + std::to_string(me) + " was stopped by SIGTERM from outside (the launcher stops every rank " +
          "once one has failed), " + where_it_stands(ring.get()));
      if (!reports) lesson14::die_of_sigterm();
      const int status = report_on_processes(o, s, p, me, parts, /*failed=*/true);
      std::fflush(nullptr);
      std::_Exit(status);
    });
  }
  try {
    parts.begin(comm, "The job");
    if (me == 0) describe(comm, o, s);
    parts.begin(comm, "Training");
    shared.training = true;
    if (me == 0) say("\n2. Training: rank 0 prints each step's mean loss");
    train(comm, o, s);
  } catch (const InjectedDeath&) {
    throw;  // it said so as it died
  } catch (const std::exception& e) {
    if (process && me == s.reporter && !shared.report.claim()) {
      // The SIGTERM thread is printing the report, and ends the process.
      std::this_thread::sleep_for(4 * kFilesWait);
      throw;
    }
    say("  rank " + std::to_string(me) + " saw: " + e.what());
    if (process && me == s.reporter && shared.training) report_on_processes(o, s, p, me, parts, /*failed=*/true);
    throw;
  }
  // The job ended: every rank writes its file as it would on a failure, so
  // that a healthy record can be read too (on thread ranks each call writes
  // every rank's file; the last call, made once every rank is done, stays).
  if (comm.flight_recorder() != nullptr) comm.flight_recorder()->dump("the job's end (lesson 14)");
  if (process && me == s.reporter && shared.report.claim())
    shared.status = report_on_processes(o, s, p, me, parts, /*failed=*/false);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.job.timeout = std::chrono::seconds(3);
  // The parts and the shared state outlive main(): a process's SIGTERM
  // thread (on_sigterm.hpp) may use them while the process exits.
  lessons::Parts& parts = *new lessons::Parts({"The job", "Training", "The diagnosis"});
  CLI::App app{"Lesson 14: debugging a hang (a bug put into one rank; the flight recorder's files say which)"};
  comm::add_job_flags(app, o.job);
  parts.add_flags(app);
  app.add_option("--bug", o.bug,
                 "the fault one rank makes: none; skip (leaves its loop before a gradient all-reduce); order "
                 "(reduces its loss first); shape (all-reduces one element fewer); dead (throws on a thread rank, "
                 "SIGKILLs itself in a process)")
      ->check(CLI::IsMember(lesson14::bug_names()))
      ->capture_default_str();
  app.add_option("--culprit", o.culprit, "the rank that makes it (default: the last rank)");
  app.add_option("--at-step", o.at_step, "the step at which it does (1..--steps)")->capture_default_str();
  app.add_option("--steps", o.steps, "training steps")->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--batch", o.batch, "rows of each step over all ranks (a multiple of the world size)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--lr", o.lr, "SGD's learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.get_option("--timeout-ms")
      ->description("give up waiting on another rank after this long (here 3000 by default; env DISTLAB_TIMEOUT_MS)");
  app.add_option_function<double>(
         "--timeout-s", [&](double s) { o.job.timeout = comm::Milliseconds(static_cast<long long>(s * 1000)); },
         "give up waiting on another rank after this many seconds (default 3, so that each fault ends quickly; "
         "the same as --timeout-ms, which it excludes)")
      ->check(CLI::Range(0.05, 3600.0))
      ->excludes("--timeout-ms");
  // The launcher writes its exit records where DISTLAB_FLIGHT_DIR points:
  // when it is set, the lesson's files go there too by default.
  if (const char* dir = std::getenv("DISTLAB_FLIGHT_DIR"); dir != nullptr && *dir != '\0') o.flight_dir = dir;
  app.add_option("--flight-dir", o.flight_dir,
                 "where every rank writes flight.rank<N>.json (made if missing; an earlier run's files there are "
                 "removed first); sets DISTLAB_FLIGHT_DIR for the job; default: DISTLAB_FLIGHT_DIR if set, where "
                 "distlab-run also writes how each failed worker ended, else flight_14 in $TMPDIR or /tmp")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines appear as they happen under a launcher's pipe

  std::error_code error;
  std::filesystem::create_directories(o.flight_dir, error);
  if (error) {
    std::fprintf(stderr, "%s: cannot make --flight-dir %s: %s\n", kProgram, o.flight_dir.c_str(),
                 error.message().c_str());
    return 1;
  }
  setenv("DISTLAB_FLIGHT_DIR", o.flight_dir.c_str(), 1);
  const bool threads = o.job.backend == "threads";
  if (threads) lesson14::remove_old_files(o.flight_dir, [](int) { return false; });

  Shared& shared = *new Shared;
  bool failed = false;
  std::string what;
  try {
    comm::run_job(comm::with_env_defaults(o.job), [&](comm::Communicator& comm) { run(comm, o, parts, shared); });
  } catch (const std::exception& e) {
    failed = true;
    what = e.what();
  }
  if (!shared.training) {  // the flags, the environment, the start: no job to diagnose
    if (failed) std::fprintf(stderr, "%s: %s\n", kProgram, what.c_str());
    return failed ? 1 : 0;
  }
  if (!threads) return failed ? 1 : shared.status.load();  // the reporting rank has printed the diagnosis

  // Thread ranks: the job is over and every rank's file written.
  const Setup s = setup_of(o, o.job.ranks);
  parts.begin_after_job(0, "The diagnosis", /*may_wait=*/true);
  std::printf("\n3. The diagnosis: the job is over; the program reads every rank's flight file\n");
  if (failed) std::printf("  the job's error (the first rank to fail): %s\n", what.c_str());
  return conclude(o, s, lesson14::print_records_and_diagnosis(o.flight_dir, o.job.ranks), failed);
}
