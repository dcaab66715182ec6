// Inside distlab-trace why (why.hpp): the job as the files show it, the
// words every finding uses, and one function per kind of finding, each in
// its own file (why_dead.cpp, why_collectives.cpp, why_p2p.cpp). Not part
// of the library's interface.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "flight/dump_file.hpp"
#include "flight/exit_file.hpp"
#include "flight/why.hpp"

namespace distlab::flight::why {

struct Job {
  std::map<int, const Dump*> by_rank;
  std::map<int, const ExitRecord*> exits;  // distlab-run's records, when there are any
  int world_size = 0;
  std::map<std::string, std::vector<int>> groups;  // name -> members' job-wide ranks
  std::vector<int> missing;                        // ranks without a file
  // Missing; or it left on its own while outside communication (its work
  // failed, or the launcher saw it end abnormally, with no operation failed
  // or timed out and the last one completed); or a signal killed it that
  // nobody asked for (why.cpp, left_on_its_own).
  std::set<int> dead;

  // Indexes every rank's collectives by group and sequence number, once the
  // dumps are in by_rank: the lookups below are then a map's, not a scan of
  // the ring (2,000 entries x 16 ranks took a second scanned).
  void index();
  // rank's collectives in `group`, oldest first.
  const std::vector<const Entry*>& collectives(int rank, const std::string& group) const;
  const Entry* collective_at(int rank, const std::string& group, uint64_t seq) const;
  const Entry* last_entry(int rank) const;
  const ExitRecord* exit_of(int rank) const;

 private:
  std::map<std::pair<int, std::string>, std::vector<const Entry*>> collectives_;
  std::map<std::pair<int, std::string>, std::map<uint64_t, const Entry*>> by_seq_;
};

// "14:03:07.412": an entry's time on the wall clock of the rank that wrote it.
std::string clock_text(const Dump& dump, int64_t us);
// "completed at 14:03:07.398", "timed out at ...", "waiting since ..."
std::string state_text(const Dump& dump, const Entry& e, bool with_error = true);
// " (site)", or "" without one.
std::string with_site(const Entry& e);
// " of group world" for a collective, "" for a send or recv.
std::string of_group(const Entry& e);
// "killed by SIGKILL, exit 137", plus ", after distlab-run asked it to stop"
// when it had.
std::string exit_text(const ExitRecord& record);

void find_dead(const Job& job, std::vector<Finding>& out);
// The first sequence number of `group` at which members called different
// collectives (order, shape, mismatch); one finding per group.
void find_mismatch(const Job& job, const std::string& group, const std::vector<int>& members,
                   std::vector<Finding>& out);
// Members that never entered the collective the others are in (skip), or
// all in it and some never finishing (stuck).
void find_skip(const Job& job, const std::string& group, const std::vector<int>& members,
               const std::set<int>& explained, std::vector<Finding>& out);
void find_p2p(const Job& job, const std::set<int>& explained, std::vector<Finding>& out);

}  // namespace distlab::flight::why
