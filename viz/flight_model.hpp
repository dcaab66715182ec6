// The flight recorder's files as the Trace panel shows them, kept apart from
// drawing: every rank's last communication operations (lib/flight), the
// diagnosis distlab-trace why gives of them (flight::diagnose, the same
// code), and where on the time axis its most telling finding lies.
//
// Times. Flight entries are stamped with trace::now_us(), the clock of the
// trace events, so on one machine they fall on the trace's axis as they
// are. A trace file of a multi-machine job carries each rank's offset to
// rank 0's clock; set_clock_offsets() moves that rank's entries by the same
// amount, as the loader moves its events.
//
// The marker. The ranks part ways at the finding's operation: the waiting
// ranks' entries of it (group and sequence number of the finding; a p2p
// finding: the op, number and peer) and the culprits' operations (the
// culprit's own call at that number when it made one, an order or shape
// mismatch; else its last operation, the one after which it went elsewhere).
// The marker's line is the earliest of the waiting ranks' entries into the
// operation; its band reaches from there to the culprits' operations (their
// end when they ended, else their entry).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flight/dump_file.hpp"
#include "flight/why.hpp"
#include "trace/clock.hpp"

namespace distlab::viz {

// One entry of one rank's dump.
struct FlightOpRef {
  int rank = 0;
  size_t entry = 0;  // index into that rank's dump's entries
  bool operator==(const FlightOpRef& o) const { return rank == o.rank && entry == o.entry; }
};

struct FlightMarker {
  int finding = -1;                          // index into the diagnosis' findings; -1: none marked
  std::vector<FlightOpRef> waiting_ops;      // the finding's operation on the waiting ranks
  std::vector<FlightOpRef> culprit_ops;      // what the culprits did instead
  int64_t at_us = 0;                         // the earliest waiting entry: where the ranks part ways
  int64_t band_begin_us = 0;                 // at_us and the culprits' operations' times
  int64_t band_end_us = 0;
  bool has_culprit_time = false;
  int64_t culprit_us = 0;                    // the latest culprit operation's time
};

// The directories of these trace files that hold flight.rank<N>.json files
// (where a job traced to a file writes them by default), each once.
std::vector<std::string> flight_dirs_beside(const std::vector<std::string>& trace_paths);

class FlightModel {
 public:
  // Reads `paths` (files, or directories holding flight.rank*.json, as
  // distlab-trace why takes them) and diagnoses what could be read. Never
  // throws: a file that cannot be read is a line of diagnosis().refused,
  // worded as why words it.
  void open(const std::vector<std::string>& paths);
  // The same from dumps (and distlab-run's exit records) already read.
  void set_dumps(std::vector<flight::Dump> dumps, std::vector<std::string> refused = {},
                 std::vector<flight::ExitRecord> exits = {});
  // Moves each rank's times by its clock offset (the trace files'); the
  // diagnosis and its text stay those of the files.
  void set_clock_offsets(const std::map<int, trace::ClockOffset>& offsets);
  void clear();

  bool loaded() const { return loaded_; }
  // Dumps read (the files that could be).
  size_t file_count() const { return files_.size(); }
  const flight::Diagnosis& diagnosis() const { return diagnosis_; }
  // The finding marked: the first (why lists the most telling first),
  // unless it is "none" (every recorded operation completed).
  const FlightMarker& marker() const { return marker_; }
  bool has_marker() const { return marker_.finding >= 0; }
  const flight::Finding* marked_finding() const {
    return has_marker() ? &diagnosis_.findings[static_cast<size_t>(marker_.finding)] : nullptr;
  }

  // Ranks 0 .. world size - 1 as the files say; a rank without a dump is
  // there too (a rank that died without writing one is often the culprit).
  const std::vector<int>& ranks() const { return ranks_; }
  // The rank's dump with times on the shared clock; null when it left none.
  const flight::Dump* dump_of(int rank) const;
  const flight::Entry& entry(const FlightOpRef& ref) const { return dump_of(ref.rank)->entries[ref.entry]; }
  // When an entry's span ends: its end, or the dump's time while it had not
  // ended (it was still waiting when the file was written).
  int64_t span_end_us(const FlightOpRef& ref) const;
  bool is_culprit(int rank) const;
  bool is_marked(const FlightOpRef& ref) const;

  // The earliest entry and the latest end (or dump) of all ranks; 0, 0
  // when there are no entries.
  int64_t begin_us() const { return begin_us_; }
  int64_t end_us() const { return end_us_; }
  // A window around the marker: from three operations before it on the
  // first waiting rank to half as far again past the band, so the last
  // agreed operations show beside the parting point. Empty without a marker.
  std::optional<std::pair<int64_t, int64_t>> focus_range() const;

 private:
  void rebuild();

  bool loaded_ = false;
  std::vector<flight::Dump> files_;   // as read: what was diagnosed
  std::vector<flight::Dump> shifted_; // the same on the shared clock, by rank
  std::map<int, size_t> by_rank_;     // rank -> index in shifted_
  std::map<int, trace::ClockOffset> offsets_;
  flight::Diagnosis diagnosis_;
  FlightMarker marker_;
  std::vector<int> ranks_;
  int64_t begin_us_ = 0;
  int64_t end_us_ = 0;
};

}  // namespace distlab::viz
