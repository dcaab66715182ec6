// distlab-run's flags and the variables each worker receives. Plain data and
// pure functions, so tests check them without starting a process.
#pragma once

#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/env.hpp"

namespace distlab::launcher {

// A bad flag or a bad combination of flags: one line, exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // 0: pick a free port (one node only)
  int max_restarts = 0;
  std::optional<int> timeout_ms;     // becomes DISTLAB_TIMEOUT_MS when given
  int grace_ms = 5000;               // SIGTERM, then this long, then SIGKILL
  bool prefix = true;                // "[rank 3] " before every line
  std::vector<std::string> command;  // program, then its arguments

  int world_size() const { return nproc_per_node * nnodes; }
  int rank_of(int local_rank) const { return node_rank * nproc_per_node + local_rank; }
};

// `args` excludes argv[0]. Returns nullopt after writing the help to
// `help_out` for --help; throws UsageError for anything wrong. MASTER_PORT in
// `env` (the launcher's own environment), when set, is --master-port's
// default in place of 29500, as a script that exports it expects.
std::optional<LaunchOptions> parse_launch_options(const std::vector<std::string>& args, std::ostream& help_out,
                                                  const comm::Environment& env = {});

// What the worker with `local_rank` gets on top of the launcher's own
// environment, in attempt `restart_count` (0 = first start).
comm::Environment worker_environment(const LaunchOptions& options, int local_rank, int restart_count, int master_port);

}  // namespace distlab::launcher
