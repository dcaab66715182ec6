// What every lesson program shares: the runner, and the lesson's parts.
//
//   lessons::Parts parts({"The story", "The tree by hand", ...});   // in the order they run
//   parts.add_flags(app);                                            // --step, --list-parts
//   CLI11_PARSE(app, argc, argv);
//   return lessons::run_lesson("lesson_03_broadcast", o.job, [&](comm::Communicator& comm) {
//     parts.begin(comm, "The story");          // every rank, before each part
//     if (comm.rank() == 0) std::printf("1. The story: ...");
//     ...
//   });
//
// The titles are the words each part's numbered heading starts with, so
// that the slides can be checked against --list-parts.
//
// --step is for class: before each part rank 0 prints the part's title and
// waits for Enter, while the other ranks wait for rank 0 with the
// communicator's timeout off (comm/wait_for_rank.hpp). Rank 0 waits only
// when a person can answer: its stdin is a terminal, or DISTLAB_STEP_WAIT=1
// (distlab-run sets it for the rank 0 it forwards its terminal to; mpirun
// -x DISTLAB_STEP_WAIT=1 for the rank 0 mpirun forwards stdin to). Otherwise
// it prints the titles and goes on; end of input (Ctrl-D) stops the waiting
// for the rest of the run.
#pragma once

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "collectives/tags.hpp"
#include "comm/communicator.hpp"
#include "comm/job.hpp"
#include "comm/wait_for_rank.hpp"

namespace distlab::lessons {

class Parts {
 public:
  // The parts in the order the lesson runs them, numbered from
  // `first_number` as the lesson's headings are (lessons 06-07 start with
  // "0. The reference").
  explicit Parts(std::vector<std::string> titles, int first_number = 1)
      : titles_(std::move(titles)), first_(first_number) {}

  // --step, and --list-parts, which prints list() and exits 0 before any job
  // starts (as --help does).
  void add_flags(CLI::App& app) {
    app.add_flag("--step", stepping_,
                 "stop before each part until Enter is pressed on rank 0's terminal (the other ranks wait "
                 "without a timeout meanwhile)");
    app.add_flag_callback(
        "--list-parts",
        [this] {
          std::fputs(list().c_str(), stdout);
          throw CLI::Success();
        },
        "print the lesson's parts, one per line, and exit");
  }

  // "1. The story\n2. The tree by hand\n..."
  std::string list() const {
    std::string text;
    for (size_t i = 0; i < titles_.size(); ++i) text += numbered(i) + "\n";
    return text;
  }

  // Every rank calls it before the part `title`, in the order declared
  // (thread ranks share this object: each rank has its own place in the
  // list). Throws std::logic_error when `title` is not the next part. With
  // --step, rank 0 prints the part and may wait for Enter, and the other
  // ranks wait for rank 0.
  void begin(comm::Communicator& comm, const std::string& title) {
    const size_t index = take_next(comm.rank(), title);
    if (!stepping_) return;
    if (comm.rank() == 0) prompt(index, /*may_wait=*/true);
    comm::wait_for_rank(comm, /*root=*/0, collectives::kLessonStepTag);
  }

  // A part that runs after the job has ended or stopped, on one rank of it,
  // with no other rank to hold (lesson 14's diagnosis, read from the files
  // the failed ranks left). The same order check and --step line; rank 0
  // waits for Enter only when `may_wait`: not while a launcher is stopping
  // the job, whose SIGKILL would not wait for a person.
  void begin_after_job(int rank, const std::string& title, bool may_wait) {
    const size_t index = take_next(rank, title);
    if (stepping_) prompt(index, may_wait && rank == 0);
  }

 private:
  std::string numbered(size_t i) const { return std::to_string(first_ + static_cast<int>(i)) + ". " + titles_[i]; }

  // The index of `title` for `rank`, which must be its next part.
  size_t take_next(int rank, const std::string& title) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t index = next_[rank];
    if (index >= titles_.size() || titles_[index] != title)
      throw std::logic_error(
          "rank " + std::to_string(rank) + ": part \"" + title + "\" begins, but the next part declared is " +
          (index < titles_.size() ? "\"" + numbered(index) + "\"" : "none (all " + std::to_string(titles_.size()) +
                                                                        " parts are done)") +
          ": begin the parts in the order lessons::Parts lists them");
    next_[rank] = index + 1;
    return index;
  }

  // Rank 0: the part's line, then (when a person can answer and `may_wait`)
  // one line from stdin.
  void prompt(size_t index, bool may_wait) {
    const std::string part = "--step: " + numbered(index) + " (part " + std::to_string(index + 1) + " of " +
                             std::to_string(titles_.size()) + ")";
    if (index == 0) {
      const char* wait = std::getenv("DISTLAB_STEP_WAIT");
      waiting_ = ::isatty(STDIN_FILENO) == 1 || (wait != nullptr && std::strcmp(wait, "1") == 0);
      if (!waiting_)
        std::printf("--step: stdin is not a terminal, so the parts follow without waiting "
                    "(DISTLAB_STEP_WAIT=1 waits anyway)\n");
    }
    if (!waiting_ || !may_wait) {
      std::printf("%s\n", part.c_str());
      std::fflush(stdout);
      return;
    }
    std::printf("%s. Press Enter (timeouts are off while rank 0 waits)\n", part.c_str());
    std::fflush(stdout);  // under a launcher stdout is a pipe: the line must be out before the wait
    int c = 0;
    while ((c = std::getchar()) != EOF && c != '\n') {
    }
    if (c == EOF) {
      waiting_ = false;
      std::printf("--step: end of input: the remaining parts follow without waiting\n");
      std::fflush(stdout);
    }
  }

  std::vector<std::string> titles_;
  int first_;
  bool stepping_ = false;
  bool waiting_ = false;  // rank 0 only
  std::mutex mutex_;
  std::map<int, size_t> next_;  // rank -> index of its next part
};

// Runs f() and returns the program's exit status: 0, or after a failure 1
// and one line, "program: what went wrong".
template <typename F>
int exit_status_of(const char* program, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  return 0;
}

// Runs body(comm) on every rank of the job (its options completed from the
// environment: comm::with_env_defaults); returns the exit status.
template <typename Body>
int run_lesson(const char* program, const comm::JobOptions& job, Body&& body) {
  return exit_status_of(program, [&] { comm::run_job(comm::with_env_defaults(job), body); });
}

}  // namespace distlab::lessons
