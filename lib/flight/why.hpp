// distlab-trace why: reads every rank's flight file and says, in a few
// lines, why the job hangs or stopped.
//
// A hang seen from one rank is a wait that timed out; its cause is usually
// on another rank. Lined up by sequence number (entry.hpp), the ranks'
// records show it:
//
//   order  at one sequence number of a group, a rank called another
//          collective: "collective mismatch at #17 of group world: ranks 0-2
//          all_reduce float32 [1024], rank 3 broadcast float32 [16]"
//   shape  the same collective with another dtype or element count
//   dead   a rank left no file (killed, or exited before it could write),
//          or left outside communication: "rank 3 left the job (killed by
//          SIGKILL, exit 137) without a flight file: rank 2 waits for it in
//          recv #9 from rank 3 (tag 0)"; the exit status comes from
//          distlab-run's exit records (exit_file.hpp), when there are any
//   skip   the others are in #42 and a rank never entered it: "ranks 0, 1, 3
//          are in all_reduce #42 (site) of group world; rank 2 never entered
//          it: its last operation in world was broadcast #41, completed at ..."
//   p2p    a recv (send) whose peer never sent (received) that message:
//          "rank 0 is in recv #2 from rank 3 (tag 0) ...; rank 3 never sent
//          it", with rank 3's last operation (and its send to rank 0 under
//          another tag, if any)
//   stuck  the members all entered a collective and some never finished it
//
// Checked in that order; a later finding is often an echo of an earlier one.
// A mismatch comes first because it is never an echo: both sides' files
// show it, and it is often why a rank left (gloo aborts a process that
// receives a longer message than it asked for).
#pragma once

#include <string>
#include <vector>

#include "flight/dump_file.hpp"
#include "flight/exit_file.hpp"

namespace distlab::flight {

struct Finding {
  std::string cause;           // dead, order, shape, mismatch, skip, p2p, stuck, none, no files
  std::string group;           // the collective's group ("" for p2p)
  uint64_t seq = 0;            // the sequence number it is about
  std::string op;              // the operation the others are in
  std::vector<int> culprits;   // the ranks it blames
  std::vector<int> waiting;    // the ranks that wait because of them
  std::string text;            // the finding in plain words, one to three lines
};

struct Diagnosis {
  std::string summary;                // "read 3 flight files: ranks 0-2 of 4 ..."
  std::vector<std::string> refused;   // one line per missing or damaged file, or exit record not used
  std::string exits;                  // "exits seen by distlab-run: rank 2 (killed by SIGKILL, exit 137); ..." or ""
  std::vector<Finding> findings;      // most telling first
};

// What a set of paths holds: files, or directories holding
// flight.rank<N>.json and flight.rank<N>.exit.json (by rank); every file
// that could not be read is one line of `refused`, never an exception.
struct FlightFiles {
  std::vector<Dump> dumps;
  std::vector<ExitRecord> exits;
  std::vector<std::string> refused;
  std::vector<std::string> paths;  // where they were looked for
};
FlightFiles read_flight_files(const std::vector<std::string>& paths);
// The flight.rank<N>.json files in `dir`, by rank ("" dir: none).
std::vector<std::string> flight_files_in(const std::string& dir);

// The analysis of dumps (and distlab-run's exit records) already read. An
// exit record whose pid differs from its rank's flight file, or whose world
// size differs from theirs, is left out with a line of `refused`.
Diagnosis diagnose(const std::vector<Dump>& dumps, const std::vector<ExitRecord>& exits = {});
// diagnose() of what read_flight_files(paths) read, its refused lines first:
// what distlab-trace why and the visualizer show. With no flight file at all
// the finding (cause "no files") names the paths and how files get there.
Diagnosis diagnose(const FlightFiles& files);
Diagnosis diagnose_files(const std::vector<std::string>& paths);

// Summary, refused files, exits, findings: what distlab-trace why prints.
std::string to_text(const Diagnosis& diagnosis);

// "rank 3", "ranks 0, 1, 3", "ranks 0-2"
std::string ranks_text(std::vector<int> ranks);

}  // namespace distlab::flight
