#include "options.hpp"

#include <CLI/CLI.hpp>

#include "comm/errors.hpp"

namespace distlab::launcher {
namespace {

constexpr const char* kUsage = "distlab-run [flags] [--] program [args...]";

// CLI11's own usage line says "[OPTIONS]" and knows nothing of the program
// that follows them: the help has this one line instead.
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return std::string("Usage: ") + kUsage + "\n";
  }
};

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

void validate(const LaunchOptions& o) {
  require(o.nproc_per_node >= 1, "--nproc-per-node must be 1 or more");
  require(o.nnodes >= 1, "--nnodes must be 1 or more");
  require(o.node_rank >= 0 && o.node_rank < o.nnodes, "--node-rank " + std::to_string(o.node_rank) + " must be in 0.." +
                                                          std::to_string(o.nnodes - 1) + " for --nnodes " +
                                                          std::to_string(o.nnodes));
  require(!o.master_addr.empty(), "--master-addr must not be empty");
  require(o.master_port >= 0 && o.master_port <= 65535, "--master-port must be in 0..65535");
  // Every node must agree on the port before any of them starts; a port
  // picked here could not be told to the other launchers.
  require(o.master_port != 0 || o.nnodes == 1, "--master-port 0 picks a free port on this node only; with --nnodes " +
                                                   std::to_string(o.nnodes) +
                                                   " give every launcher the same port, e.g. --master-port 29500");
  require(o.max_restarts >= 0, "--max-restarts must be 0 or more");
  require(!o.timeout_ms || *o.timeout_ms >= 1, "--timeout-ms must be 1 or more");
  require(o.grace_ms >= 0, "--grace-ms must be 0 or more");
  require(!o.command.empty(), std::string("no program given; usage: ") + kUsage);
}

// MASTER_PORT as every worker reads it (comm::world_from: a port in
// 1..65535, refused naming the variable otherwise), else 29500.
int default_port(const comm::Environment& env) {
  auto it = env.find("MASTER_PORT");
  if (it == env.end()) return LaunchOptions{}.master_port;
  try {
    return comm::world_from({{"MASTER_PORT", it->second}}).master_port;
  } catch (const comm::SetupError& e) {
    throw UsageError(e.what());
  }
}

}  // namespace

std::optional<LaunchOptions> parse_launch_options(const std::vector<std::string>& args, std::ostream& help_out,
                                                  const comm::Environment& env) {
  LaunchOptions o;
  o.master_port = default_port(env);
  int timeout_ms = 0;
  bool no_prefix = false;
  CLI::App app{"distlab-run: starts the ranks of a DistLab job on this node (torchrun-like)", "distlab-run"};
  app.add_option("--nproc-per-node", o.nproc_per_node, "processes (ranks) on this node")->capture_default_str();
  app.add_option("--nnodes", o.nnodes, "nodes in the job")->capture_default_str();
  app.add_option("--node-rank", o.node_rank, "this node's index, 0..nnodes-1")->capture_default_str();
  app.add_option("--master-addr", o.master_addr, "host of rank 0")->capture_default_str();
  app.add_option("--master-port", o.master_port, "port of rank 0 ($MASTER_PORT when set); 0 picks a free one (one node only)")
      ->capture_default_str();
  app.add_option("--max-restarts", o.max_restarts, "restart all workers this many times after a failure")
      ->capture_default_str();
  auto* timeout = app.add_option("--timeout-ms", timeout_ms, "sets DISTLAB_TIMEOUT_MS for the workers");
  app.add_option("--grace-ms", o.grace_ms, "time between SIGTERM and SIGKILL when stopping workers")
      ->capture_default_str();
  app.add_flag("--no-prefix", no_prefix, "print worker lines without the \"[rank N] \" prefix");
  app.formatter(std::make_shared<UsageFormatter>());
  // The first word that is not a flag starts the program's own arguments.
  app.prefix_command();

  // CLI11 wants argv order reversed in a vector.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    help_out << app.help();
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + " (see distlab-run --help)");
  }
  o.command = app.remaining();
  if (!o.command.empty() && o.command.front() == "--") {
    o.command.erase(o.command.begin());
  } else if (!o.command.empty() && o.command.front().rfind("-", 0) == 0) {
    // prefix_command() takes an unknown flag for the program's first word.
    throw UsageError("unknown flag " + o.command.front() + " (see distlab-run --help)");
  }
  if (timeout->count() > 0) o.timeout_ms = timeout_ms;
  o.prefix = !no_prefix;
  validate(o);
  return o;
}

comm::Environment worker_environment(const LaunchOptions& o, int local_rank, int restart_count, int master_port) {
  comm::Environment env{
      {"RANK", std::to_string(o.rank_of(local_rank))},
      {"WORLD_SIZE", std::to_string(o.world_size())},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
      {"RESTART_COUNT", std::to_string(restart_count)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"DISTLAB_LAUNCHER", "1"},
  };
  if (o.timeout_ms) env["DISTLAB_TIMEOUT_MS"] = std::to_string(*o.timeout_ms);
  return env;
}

}  // namespace distlab::launcher
