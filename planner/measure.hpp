// Running a layout for real: lesson 11's command line for it (model_shape.hpp's
// capstone_command) as a child process on thread ranks, a few steps after a
// warm-up, each step's time read from its log (--log-interval 1: one
// "ms/batch" line per step), its peak memory from the allocator meter
// (--meter-memory: the bytes LibTorch allocated for the run's tensors, what
// the memory model predicts) and its peak resident memory (VmHWM, as lesson 11
// prints it beside the meter's peak: the parent's rusage would count the
// forking parent's pages too).
// A layout that fails or runs past its time is reported with its error;
// the caller goes on with the next (DeepSpeed's autotuner hangs there,
// deepspeed#4100).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distlab::planner {

struct MeasureOptions {
  std::string capstone;   // lesson_11_capstone's path
  std::string data;       // --data for it ("" : its default)
  int warmup = 2;         // steps not counted
  int steps = 5;          // steps timed
  double timeout_s = 300; // the child is killed past it
  std::string launcher;   // distlab-run's path, for measure_rank_memory
};

struct Measured {
  bool ok = false;
  std::string error;            // the child's last line of stderr, or why it was stopped
  std::vector<double> step_s;   // the timed steps
  double median_s = 0, low_s = 0, high_s = 0;  // of step_s
  int64_t metered_bytes = 0;    // the allocator meter's peak: every thread rank's tensors together
  int64_t peak_rss_bytes = 0;   // the child's, as it printed it (LibTorch's code and caches included); 0 when not
};

// `command`: capstone_command(...) without the program's name's path.
Measured measure(const std::string& command, const MeasureOptions& options);

// One layout's runs made at different times, as one: every timed step
// together (their median, lowest and highest), the largest peaks; not ok
// when any run failed (its error kept).
Measured combine(const std::vector<Measured>& runs);

// The timed steps in a lesson 11 log: per step, the slowest rank's
// "ms/batch" (every printing rank logs each step), the first `warmup` left out.
std::vector<double> steps_from_log(const std::string& log, int warmup);

// The peak lesson 11's --meter-memory printed ("memory: peak N bytes"); -1 if none.
int64_t metered_bytes_from_log(const std::string& log);
// The resident peak on the same line ("; resident peak M bytes"); -1 if none.
int64_t resident_bytes_from_log(const std::string& log);

// argv[0]'s folder/../lessons/lesson_11_capstone.
std::string default_capstone(const char* argv0);

// Each rank's own peak memory. Thread ranks share one allocator meter, so
// measure() sees the job's; here `command` runs again for 2 steps under
// distlab-run, one process a rank (gloo), each process's meter counting
// its own rank's tensors.
struct RankPeaks {
  bool ok = false;
  std::string error;           // the run's last line, or the rank that printed no peak
  std::vector<int64_t> bytes;  // by world rank
};
RankPeaks measure_rank_memory(const std::string& command, int ranks, const MeasureOptions& options);

// Every rank's "[RANK r]: memory: peak N bytes" line in a log, by rank; -1 where none.
std::vector<int64_t> rank_bytes_from_log(const std::string& log, int ranks);

// The launcher beside a build's lesson: the capstone's folder/../launcher/distlab-run.
std::string default_launcher(const std::string& capstone);

}  // namespace distlab::planner
