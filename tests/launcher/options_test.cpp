// distlab-run's pieces without starting a process: flags, the variables a
// worker gets (read back through the same parser a worker uses), the
// cutting of output into prefixed lines, and where the exit records go.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <random>
#include <sstream>

#include "comm/env.hpp"
#include "exit_records.hpp"
#include "line_prefixer.hpp"
#include "options.hpp"

namespace distlab::launcher {
namespace {

LaunchOptions parse(const std::vector<std::string>& args) {
  std::ostringstream help;
  auto o = parse_launch_options(args, help);
  EXPECT_TRUE(o.has_value());
  return o.value_or(LaunchOptions{});
}

std::string usage_error(const std::vector<std::string>& args) {
  std::ostringstream help;
  try {
    parse_launch_options(args, help);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Options, Defaults) {
  LaunchOptions o = parse({"prog"});
  EXPECT_EQ(o.nproc_per_node, 1);
  EXPECT_EQ(o.nnodes, 1);
  EXPECT_EQ(o.node_rank, 0);
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, 29500);
  EXPECT_EQ(o.max_restarts, 0);
  EXPECT_FALSE(o.timeout_ms.has_value());
  EXPECT_TRUE(o.prefix);
  EXPECT_EQ(o.command, std::vector<std::string>{"prog"});
}

// A script that exports MASTER_PORT (as Slurm scripts do) moves the default;
// the flag still wins, and a value that is no port is refused by name.
TEST(Options, MasterPortFromTheEnvironmentIsTheDefault) {
  std::ostringstream help;
  EXPECT_EQ(parse_launch_options({"prog"}, help, {{"MASTER_PORT", "29811"}})->master_port, 29811);
  EXPECT_EQ(parse_launch_options({"--master-port", "4000", "prog"}, help, {{"MASTER_PORT", "29811"}})->master_port,
            4000);
  EXPECT_EQ(parse_launch_options({"prog"}, help, {{"MASTER_ADDR", "10.0.0.1"}})->master_port, 29500);
  for (const char* bad : {"", "abc", "0", "70000", "29500x"}) {
    try {
      parse_launch_options({"prog"}, help, {{"MASTER_PORT", bad}});
      ADD_FAILURE() << "MASTER_PORT='" << bad << "' was taken";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), "environment: MASTER_PORT='" + std::string(bad) +
                                           "' is not a TCP port; set it to a number in 1..65535");
    }
  }
}

TEST(Options, AllFlagsAndTheProgramsOwnArguments) {
  LaunchOptions o = parse({"--nproc-per-node",
                           "4",
                           "--nnodes=2",
                           "--node-rank",
                           "1",
                           "--master-addr",
                           "10.0.0.5",
                           "--master-port",
                           "4000",
                           "--max-restarts",
                           "3",
                           "--timeout-ms",
                           "2500",
                           "--grace-ms",
                           "100",
                           "--no-prefix",
                           "./train",
                           "--nproc-per-node",
                           "9",
                           "-x"});
  EXPECT_EQ(o.nproc_per_node, 4);
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.master_addr, "10.0.0.5");
  EXPECT_EQ(o.master_port, 4000);
  EXPECT_EQ(o.max_restarts, 3);
  EXPECT_EQ(o.timeout_ms, 2500);
  EXPECT_EQ(o.grace_ms, 100);
  EXPECT_FALSE(o.prefix);
  // Flags after the program belong to the program.
  EXPECT_EQ(o.command, (std::vector<std::string>{"./train", "--nproc-per-node", "9", "-x"}));
}

TEST(Options, DoubleDashSeparatesTheProgram) {
  LaunchOptions o = parse({"--nproc-per-node", "2", "--", "prog", "--help"});
  EXPECT_EQ(o.nproc_per_node, 2);
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "--help"}));
}

TEST(Options, HelpIsNotAnError) {
  std::ostringstream help;
  EXPECT_FALSE(parse_launch_options({"--help"}, help).has_value());
  EXPECT_NE(help.str().find("--nproc-per-node"), std::string::npos);
}

TEST(Options, BadFlagsGiveOneClearLine) {
  struct Case {
    std::vector<std::string> args;
    std::string message_has;
  };
  std::vector<Case> cases{
      {{"--nproc-per-node", "0", "prog"}, "--nproc-per-node must be 1 or more"},
      {{"--nproc-per-node", "two", "prog"}, "--nproc-per-node"},
      {{"--nnodes", "2", "--node-rank", "2", "prog"}, "--node-rank 2 must be in 0..1"},
      {{"--node-rank", "-1", "prog"}, "--node-rank -1"},
      {{"--master-port", "70000", "prog"}, "--master-port must be in 0..65535"},
      {{"--nnodes", "2", "--master-port", "0", "prog"}, "same port"},
      {{"--max-restarts", "-1", "prog"}, "--max-restarts"},
      {{"--timeout-ms", "0", "prog"}, "--timeout-ms"},
      {{"--nproc-per-node", "2"}, "no program given"},
      {{"--bogus", "prog"}, "--bogus"},
  };
  for (const auto& c : cases) {
    std::string message = usage_error(c.args);
    SCOPED_TRACE(c.args.front());
    ASSERT_FALSE(message.empty()) << "accepted";
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find(c.message_has), std::string::npos) << message;
  }
}

// The launcher's variables, read back by the parser every worker uses, give
// rank = node_rank * nproc_per_node + local_rank over the whole job.
TEST(Options, WorkerEnvironmentNumbersEveryRankOnce) {
  const int nnodes = 3, nproc = 4;
  std::vector<int> seen(nnodes * nproc, 0);
  for (int node = 0; node < nnodes; ++node) {
    LaunchOptions o =
        parse({"--nnodes", std::to_string(nnodes), "--node-rank", std::to_string(node), "--nproc-per-node",
               std::to_string(nproc), "--master-addr", "node0", "--max-restarts", "5", "--timeout-ms", "777", "prog"});
    for (int local = 0; local < nproc; ++local) {
      comm::Environment env = worker_environment(o, local, /*restart_count=*/2, /*master_port=*/4321);
      comm::WorldInfo w = comm::world_from(env);
      EXPECT_EQ(w.source, "torchrun");
      EXPECT_EQ(w.rank, node * nproc + local);
      EXPECT_EQ(w.world_size, nnodes * nproc);
      EXPECT_EQ(w.local_rank, local);
      EXPECT_EQ(w.local_world_size, nproc);
      EXPECT_EQ(w.master_addr, "node0");
      EXPECT_EQ(w.master_port, 4321);
      EXPECT_EQ(w.restart_count, 2);
      EXPECT_EQ(env["GROUP_RANK"], std::to_string(node));
      EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "2");
      EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "5");
      EXPECT_EQ(env["DISTLAB_TIMEOUT_MS"], "777");
      EXPECT_EQ(env["DISTLAB_LAUNCHER"], "1");
      ++seen[w.rank];
    }
  }
  for (int count : seen) EXPECT_EQ(count, 1);
}

TEST(Options, NoTimeoutFlagLeavesTheVariableUnset) {
  EXPECT_EQ(worker_environment(parse({"prog"}), 0, 0, 1).count("DISTLAB_TIMEOUT_MS"), 0u);
}

std::vector<std::string> cut(const std::string& prefix, const std::vector<std::string>& chunks) {
  std::vector<std::string> lines;
  LinePrefixer p(prefix, [&](const std::string& line) { lines.push_back(line); });
  for (const auto& c : chunks) p.feed(c.data(), c.size());
  p.finish();
  return lines;
}

TEST(LinePrefixer, WholeLinesWithPrefixAndTheLastPartialLineEnded) {
  EXPECT_EQ(cut("[rank 3] ", {"ab", "c\nde", "f\n\ng"}),
            (std::vector<std::string>{"[rank 3] abc\n", "[rank 3] def\n", "[rank 3] \n", "[rank 3] g\n"}));
  EXPECT_EQ(cut("", {"x\n"}), std::vector<std::string>{"x\n"});
  EXPECT_TRUE(cut("[rank 0] ", {}).empty());
}

// Any cut of a stream into chunks gives the same lines as the whole text
// split at '\n' (the reference).
TEST(LinePrefixer, ChunkBoundariesDoNotMatter) {
  std::mt19937 rng(7);
  std::string text;
  for (int i = 0; i < 2000; ++i) text += (rng() % 9 == 0) ? '\n' : static_cast<char>('a' + rng() % 26);
  text += "tail";
  std::vector<std::string> reference;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) reference.push_back("> " + line + "\n");

  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::string> chunks;
    for (size_t at = 0; at < text.size();) {
      size_t n = 1 + rng() % 50;
      chunks.push_back(text.substr(at, n));
      at += n;
    }
    EXPECT_EQ(cut("> ", chunks), reference);
  }
}

TEST(LinePrefixer, AnEndlessLineIsHandedOnInPieces) {
  std::string big(LinePrefixer::kMaxLine * 2 + 10, 'x');
  auto lines = cut("p ", {big});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "p " + std::string(LinePrefixer::kMaxLine, 'x') + "\n");
  EXPECT_EQ(lines[2], "p " + std::string(10, 'x') + "\n");
}

// The workers' flight directory, as comm/job.cpp picks it: DISTLAB_FLIGHT_DIR,
// else the directory of the program's --trace (flag over DISTLAB_TRACE).
TEST(ExitRecords, TheLauncherPicksTheWorkersFlightDirectory) {
  struct Saved {
    const char* name;
    std::optional<std::string> value;
  };
  std::vector<Saved> saved;
  for (const char* name : {"DISTLAB_FLIGHT_DIR", "DISTLAB_TRACE"}) {
    const char* v = std::getenv(name);
    saved.push_back({name, v ? std::optional<std::string>(v) : std::nullopt});
    ::unsetenv(name);
  }
  EXPECT_EQ(workers_flight_dir({"prog", "--backend", "gloo"}), ".");
  EXPECT_EQ(workers_flight_dir({"prog", "--trace", "out/t.json"}), "out");
  EXPECT_EQ(workers_flight_dir({"prog", "--trace=/tmp/run/t.json", "--steps", "3"}), "/tmp/run");
  EXPECT_EQ(workers_flight_dir({"prog", "--trace", "t.json"}), ".");
  EXPECT_EQ(workers_flight_dir({"prog", "--trace", "/t.json"}), "/");
  EXPECT_EQ(workers_flight_dir({"--trace", "out/t.json"}), ".") << "the program's name is not its flag";
  ::setenv("DISTLAB_TRACE", "env/dir/t.json", 1);
  EXPECT_EQ(workers_flight_dir({"prog"}), "env/dir");
  EXPECT_EQ(workers_flight_dir({"prog", "--trace", "flag/t.json"}), "flag");
  ::setenv("DISTLAB_FLIGHT_DIR", "flights", 1);
  EXPECT_EQ(workers_flight_dir({"prog", "--trace", "flag/t.json"}), "flights");
  for (const auto& s : saved)
    if (s.value)
      ::setenv(s.name, s.value->c_str(), 1);
    else
      ::unsetenv(s.name);
}

}  // namespace
}  // namespace distlab::launcher
