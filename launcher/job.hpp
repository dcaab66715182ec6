// The whole job on this node: attempts, restarts, and the exit code.
#pragma once

#include "options.hpp"

namespace distlab::launcher {

// Exit codes of distlab-run.
constexpr int kExitOk = 0;
constexpr int kExitJobFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitCannotRun = 127;  // as a shell says for a missing program
// Interrupted by signal s: 128 + s (130 for Ctrl-C), as a shell reports it.

// Starts the workers and restarts all of them after a failure while
// `options.max_restarts` allows. Prints its own one-line messages.
int run_job(const LaunchOptions& options);

}  // namespace distlab::launcher
