// Running a layout for real: lesson 11's command line for it (model_shape.hpp's
// capstone_command) as a child process on thread ranks, a few steps after a
// warm-up, each step's time read from its log (--log-interval 1: one
// "ms/batch" line per step), its peak memory from the allocator meter
// (--meter-memory: the bytes LibTorch allocated for the run's tensors, what
// the memory model predicts) and its peak resident memory from the kernel.
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
};

struct Measured {
  bool ok = false;
  std::string error;            // the child's last line of stderr, or why it was stopped
  std::vector<double> step_s;   // the timed steps
  double median_s = 0, low_s = 0, high_s = 0;  // of step_s
  int64_t metered_bytes = 0;    // the allocator meter's peak: every thread rank's tensors together
  int64_t peak_rss_bytes = 0;   // the child's (LibTorch's code and caches included)
};

// `command`: capstone_command(...) without the program's name's path.
Measured measure(const std::string& command, const MeasureOptions& options);

// The timed steps in a lesson 11 log: per step, the slowest rank's
// "ms/batch" (every printing rank logs each step), the first `warmup` left out.
std::vector<double> steps_from_log(const std::string& log, int warmup);

// The peak lesson 11's --meter-memory printed ("memory: peak N bytes"); -1 if none.
int64_t metered_bytes_from_log(const std::string& log);

// argv[0]'s folder/../lessons/lesson_11_capstone.
std::string default_capstone(const char* argv0);

}  // namespace distlab::planner
