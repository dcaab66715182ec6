// distlab-run's exit records (flight/exit_file.hpp) in the diagnosis, fed
// by hand: flight dumps built here entry by entry, exit records written out
// as JSON text, so what `why` must say follows from what the test put in.
// A rank SIGKILLed without a file, a rank killed during a recv after it
// dumped, a rank whose work failed; records from another run left out,
// damaged ones refused with a line; the record's own round trip.
#include <gtest/gtest.h>

#include <fstream>

#include "fault_checks.hpp"
#include "flight/dump_file.hpp"
#include "flight/exit_file.hpp"
#include "flight/why.hpp"
#include "launcher_process.hpp"
#include "run_why.hpp"

namespace {

using distlab::launcher::testing::fresh_dir;
using distlab::flight_test::contains;
using distlab::flight_test::run_why;
namespace flight = distlab::flight;

constexpr int64_t kDumpedUs = 50'000'000;              // the dumps' monotonic clock at the dump
constexpr int64_t kDumpedUnixUs = 1'800'000'000'000'000;  // and the wall clock then

flight::Entry collective(uint64_t seq, flight::State state) {
  flight::Entry e;
  e.id = seq;
  e.group = "world";
  e.kind = "collective";
  e.seq = seq;
  e.op = seq == 0 ? "broadcast" : "all_reduce";
  e.algorithm = "ring";
  e.dtype = "float32";
  e.shape = {1024};
  e.bytes = 4096;
  e.state = state;
  e.entered_us = e.started_us = 40'000'000 + 1000 * static_cast<int64_t>(seq);
  if (e.done()) e.ended_us = e.started_us + 500;
  return e;
}

flight::Entry message(uint64_t id, const std::string& op, int peer, uint64_t seq, flight::State state) {
  flight::Entry e;
  e.id = id;
  e.group = "world";
  e.kind = "p2p";
  e.seq = seq;
  e.op = op;
  e.peer = peer;
  e.tag = 0;
  e.dtype = "float32";
  e.shape = {8};
  e.bytes = 32;
  e.state = state;
  e.entered_us = e.started_us = 45'000'000 + 1000 * static_cast<int64_t>(id);
  if (e.done()) e.ended_us = e.started_us + 500;
  return e;
}

flight::Dump dump_of(int rank, int world_size, const std::string& exit, std::vector<flight::Entry> entries) {
  flight::Dump d;
  d.rank = rank;
  d.world_size = world_size;
  d.pid = 1000 + rank;
  d.host = "vm";
  d.reason = "SIGTERM";
  d.dumped_us = kDumpedUs;
  d.dumped_unix_us = kDumpedUnixUs;
  d.capacity = 2000;
  d.recorded = entries.size();
  d.exit = exit;
  std::vector<int> world(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) world[static_cast<size_t>(r)] = r;
  d.groups = {{"world", world}};
  d.entries = std::move(entries);
  return d;
}

// Ranks 0 and 1 of 3 wait in all_reduce #4 after #0-#3 completed; rank 2
// has no file.
std::vector<flight::Dump> two_waiting_for_rank_2() {
  std::vector<flight::Dump> dumps;
  for (int r = 0; r < 2; ++r) {
    std::vector<flight::Entry> entries;
    for (uint64_t k = 0; k < 4; ++k) entries.push_back(collective(k, flight::State::kCompleted));
    entries.push_back(collective(4, flight::State::kStarted));
    dumps.push_back(dump_of(r, 3, "", entries));
  }
  return dumps;
}

// An exit record as distlab-run writes it, spelled out by hand.
std::string exit_json(int rank, int world_size, int pid, int exit_code, const std::string& signal, bool asked,
                      int64_t unix_us) {
  return "{\"format\": \"distlab-flight-exit\", \"version\": 1, \"rank\": " + std::to_string(rank) +
         ", \"world_size\": " + std::to_string(world_size) + ", \"pid\": " + std::to_string(pid) +
         ", \"host\": \"vm\", \"restart\": 0, \"exit_code\": " + std::to_string(exit_code) + ", \"signal\": \"" +
         signal + "\", \"asked_to_stop\": " + (asked ? "true" : "false") + ", \"unix_us\": " +
         std::to_string(unix_us) + "}\n";
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string write_dumps(const std::string& name, const std::vector<flight::Dump>& dumps) {
  const std::string dir = fresh_dir(name);
  for (const auto& d : dumps) flight::write_dump(d, flight::dump_path(dir, d.rank));
  return dir;
}

TEST(FlightExits, ARankKilledWithoutAFileIsNamedWithItsSignalAndExitCode) {
  const std::string dir = write_dumps("exits_sigkill", two_waiting_for_rank_2());
  const auto before = flight::diagnose_files({dir});
  EXPECT_TRUE(contains(before.findings.front().text,
                       "rank 2 left the job without a flight file (killed, or exited before it could write one):"))
      << flight::to_text(before);
  EXPECT_EQ(before.exits, "");

  write_text(dir + "/flight.rank2.exit.json", exit_json(2, 3, 1002, 137, "SIGKILL", false, kDumpedUnixUs - 300));
  write_text(dir + "/flight.rank0.exit.json", exit_json(0, 3, 1000, 143, "SIGTERM", true, kDumpedUnixUs + 100));
  write_text(dir + "/flight.rank1.exit.json", exit_json(1, 3, 1001, 143, "SIGTERM", true, kDumpedUnixUs + 200));
  write_text(dir + "/flight.rank1.exit.json.tmp4242", "half a reco");  // a write under way: not read
  const auto d = flight::diagnose_files({dir});
  const std::string text = flight::to_text(d);
  distlab::flight_test::expect_first_finding(d, "dead", {2}, 4, "all_reduce");
  EXPECT_EQ(d.findings.front().waiting, (std::vector<int>{0, 1})) << text;
  EXPECT_EQ(d.findings.front().text.substr(0, d.findings.front().text.find('\n')),
            "rank 2 left the job (killed by SIGKILL, exit 137) without a flight file:")
      << text;
  EXPECT_TRUE(contains(text, "\n  rank 1 waits for it in all_reduce #4 of group world, waiting since ")) << text;
  EXPECT_EQ(d.exits,
            "exits seen by distlab-run: rank 2 (killed by SIGKILL, exit 137); ranks 0, 1 (killed by SIGTERM, exit 143) "
            "after distlab-run asked them to stop");
  EXPECT_TRUE(contains(text, "read 2 flight file(s): ranks 0, 1 of 3; none from rank 2\nexits seen by distlab-run: "))
      << text;

  // The tool prints the same, given the directory or the files one by one
  // (a shell's flight.rank*.json takes in the exit records too).
  const auto by_dir = run_why(dir);
  EXPECT_EQ(by_dir.exit_code, 0) << by_dir.out;
  EXPECT_EQ(by_dir.out, text);
  const auto by_glob = run_why(dir + "/flight.rank*.json");
  EXPECT_EQ(by_glob.out, text);
  std::printf("%s", text.c_str());
}

// A rank dumped on SIGUSR1 while in recv #9 from rank 2, then was SIGKILLed:
// its file says what it was doing, the record how it ended.
TEST(FlightExits, ARankKilledAfterItsDumpLeftDuringItsLastOperation) {
  std::vector<flight::Dump> dumps;
  for (int r = 0; r < 2; ++r)
    dumps.push_back(dump_of(r, 4, "returned", {collective(0, flight::State::kCompleted)}));
  dumps.push_back(dump_of(2, 4, "", {collective(0, flight::State::kCompleted),
                                     message(1, "send", 3, 8, flight::State::kCompleted),
                                     message(2, "recv", 3, 4, flight::State::kStarted)}));
  dumps.push_back(dump_of(3, 4, "", {collective(0, flight::State::kCompleted),
                                     message(1, "recv", 2, 8, flight::State::kCompleted),
                                     message(2, "send", 2, 3, flight::State::kCompleted),
                                     message(3, "recv", 2, 9, flight::State::kStarted)}));
  dumps[3].reason = "SIGUSR1";

  // Without the record: two ranks wait in a recv from each other.
  const auto alone = flight::diagnose(dumps);
  EXPECT_EQ(alone.findings.front().cause, "p2p") << flight::to_text(alone);

  flight::ExitRecord killed;
  killed.rank = 3;
  killed.world_size = 4;
  killed.pid = 1003;
  killed.exit_code = 137;
  killed.signal = "SIGKILL";
  const auto d = flight::diagnose(dumps, {killed});
  const std::string text = flight::to_text(d);
  distlab::flight_test::expect_first_finding(d, "dead", {3}, 4, "recv");
  EXPECT_EQ(d.findings.front().waiting, std::vector<int>{2}) << text;
  EXPECT_TRUE(contains(text, "rank 3 left the job (killed by SIGKILL, exit 137) during recv #9 from rank 2 (tag 0), "
                             "waiting since "))
      << text;
  EXPECT_TRUE(contains(text, "\n  rank 2 waits for it in recv #4 from rank 3 (tag 0), waiting since ")) << text;
  std::printf("%s", text.c_str());
}

// A rank whose work threw after its last collective wrote its file, then
// exited with code 1: the finding gives both.
TEST(FlightExits, ARankWithAFileGetsItsExitStatusToo) {
  std::vector<flight::Dump> dumps = two_waiting_for_rank_2();
  std::vector<flight::Entry> mine;
  for (uint64_t k = 0; k < 4; ++k) mine.push_back(collective(k, flight::State::kCompleted));
  dumps.push_back(dump_of(2, 3, "failed: out of data", mine));
  flight::ExitRecord exited;
  exited.rank = 2;
  exited.world_size = 3;
  exited.pid = 1002;
  exited.exit_code = 1;
  const auto d = flight::diagnose(dumps, {exited});
  const std::string text = flight::to_text(d);
  distlab::flight_test::expect_first_finding(d, "dead", {2}, 4, "all_reduce");
  EXPECT_TRUE(contains(text, "rank 2 left the job (failed: out of data; exit 1) after all_reduce #3 of group world, "
                             "completed at "))
      << text;
  EXPECT_EQ(d.exits, "exits seen by distlab-run: rank 2 (exit 1)");

  // The same record with another pid is another process's: left out, said so.
  exited.pid = 5555;
  const auto other = flight::diagnose(dumps, {exited});
  ASSERT_EQ(other.refused.size(), 1u) << flight::to_text(other);
  EXPECT_EQ(other.refused[0],
            "exit record of rank 2 (pid 5555): its flight file was written by pid 1002, so one of them is from "
            "another run or restart; the record is not used");
  EXPECT_EQ(other.exits, "");
  EXPECT_TRUE(contains(other.findings.front().text, "rank 2 left the job (failed: out of data) after all_reduce #3"))
      << flight::to_text(other);
}

TEST(FlightExits, DamagedRecordsAreRefusedWithOneLineEachAndTheRestIsRead) {
  const std::string dir = write_dumps("exits_damaged", two_waiting_for_rank_2());
  const std::string good = exit_json(2, 3, 1002, 137, "SIGKILL", false, kDumpedUnixUs);
  write_text(dir + "/flight.rank2.exit.json", good.substr(0, good.size() / 2));  // truncated
  write_text(dir + "/flight.rank3.exit.json", "{\"format\": \"distlab-flight\", \"version\": 1}");
  std::string newer = good;
  newer.replace(newer.find("\"version\": 1"), 12, "\"version\": 7");
  write_text(dir + "/flight.rank4.exit.json", newer);
  std::string no_signal = good;
  no_signal.replace(no_signal.find("\"signal\""), 8, "\"sigmal\"");
  write_text(dir + "/flight.rank5.exit.json", no_signal);
  write_text(dir + "/flight.rank6.exit.json", exit_json(9, 3, 1009, 1, "", false, kDumpedUnixUs));
  write_text(dir + "/flight.rank7.exit.json", "\x01\x02 not json");

  const auto d = flight::diagnose_files({dir});
  const std::string text = flight::to_text(d);
  ASSERT_EQ(d.refused.size(), 6u) << text;
  EXPECT_TRUE(contains(d.refused[0], dir + "/flight.rank2.exit.json: damaged (not complete JSON")) << text;
  EXPECT_TRUE(contains(d.refused[1], "flight.rank3.exit.json: not an exit record (no \"format\": "
                                     "\"distlab-flight-exit\")"))
      << text;
  EXPECT_TRUE(contains(d.refused[2], "flight.rank4.exit.json: exit record version 7, this tool reads version 1"))
      << text;
  EXPECT_TRUE(contains(d.refused[3], "flight.rank5.exit.json: damaged (")) << text;
  EXPECT_TRUE(contains(d.refused[4], "flight.rank6.exit.json: rank 9 of world size 3")) << text;
  EXPECT_TRUE(contains(d.refused[5], "flight.rank7.exit.json: damaged (not complete JSON")) << text;
  for (const auto& line : d.refused) EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  // The dumps are still read, and the diagnosis is what it is without records.
  EXPECT_EQ(d.exits, "");
  EXPECT_TRUE(contains(d.findings.front().text, "rank 2 left the job without a flight file (killed, or exited"))
      << text;

  const auto tool = run_why(dir);
  EXPECT_EQ(tool.exit_code, 0) << tool.out;
  EXPECT_TRUE(contains(tool.out, "refused " + dir + "/flight.rank4.exit.json: exit record version 7")) << tool.out;
  EXPECT_TRUE(contains(tool.out, "rank 2 left the job without a flight file")) << tool.out;
}

TEST(FlightExits, RecordsRoundTripAndAreNamedByRank) {
  const std::string dir = fresh_dir("exits_round_trip");
  flight::ExitRecord r;
  r.rank = 3;
  r.world_size = 4;
  r.pid = 812;
  r.host = "node7";
  r.restart = 2;
  r.exit_code = 134;
  r.signal = "SIGABRT";
  r.asked_to_stop = true;
  r.unix_us = kDumpedUnixUs;
  const std::string path = flight::exit_path(dir, 3);
  EXPECT_EQ(path, dir + "/flight.rank3.exit.json");
  flight::write_exit(r, path);
  const flight::ExitRecord back = flight::read_exit(path);
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.world_size, 4);
  EXPECT_EQ(back.pid, 812);
  EXPECT_EQ(back.host, "node7");
  EXPECT_EQ(back.restart, 2);
  EXPECT_EQ(back.exit_code, 134);
  EXPECT_EQ(back.signal, "SIGABRT");
  EXPECT_TRUE(back.asked_to_stop);
  EXPECT_EQ(back.unix_us, kDumpedUnixUs);
  EXPECT_EQ(flight::describe(back), "killed by SIGABRT, exit 134");
  r.signal = "";
  r.exit_code = 3;
  EXPECT_EQ(flight::describe(r), "exit 3");
  EXPECT_TRUE(flight::is_exit_path("out/flight.rank12.exit.json"));
  EXPECT_FALSE(flight::is_exit_path("out/flight.rank12.json"));
  EXPECT_FALSE(flight::is_exit_path("out/flight.rank12.exit.json.tmp77"));
  EXPECT_FALSE(flight::is_exit_path("flight.rankX.exit.json"));
}

}  // namespace
