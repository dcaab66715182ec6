// The "dead" finding of distlab-trace why: a rank that left the job while
// others wait for it. Its own file, when it wrote one, says what it did
// last; distlab-run's exit record (exit_file.hpp), when there is one, says
// how its process ended, which is all there is of a rank killed by SIGKILL.
#include <algorithm>

#include "flight/why_job.hpp"

namespace distlab::flight::why {

namespace {

// "rank 3 left the job (killed by SIGKILL, exit 137) without a flight file",
// "rank 1 left the job (failed: ...; exit 1) after all_reduce #3 of group
// world, completed at ...", "... during recv #9 from rank 2 (tag 0), waiting since ..."
std::string how_it_left(const Job& job, int gone) {
  const std::string rank = "rank " + std::to_string(gone);
  const ExitRecord* record = job.exit_of(gone);
  auto it = job.by_rank.find(gone);
  if (it == job.by_rank.end())
    return record ? rank + " left the job (" + exit_text(*record) + ") without a flight file"
                  : rank + " left the job without a flight file (killed, or exited before it could write one)";
  const Dump& dump = *it->second;
  std::string how = dump.exit;
  if (record) how += (how.empty() ? "" : "; ") + exit_text(*record);
  std::string text = rank + " left the job" + (how.empty() ? "" : " (" + how + ")");
  if (const Entry* last = job.last_entry(gone))
    text += (last->done() ? " after " : " during ") + name_of(*last) + of_group(*last) + ", " + state_text(dump, *last);
  return text;
}

}  // namespace

void find_dead(const Job& job, std::vector<Finding>& out) {
  for (int gone : job.dead) {
    Finding f;
    f.cause = "dead";
    f.culprits = {gone};
    std::string waits;
    for (const auto& [rank, dump] : job.by_rank) {
      if (rank == gone) continue;
      for (auto it = dump->entries.rbegin(); it != dump->entries.rend(); ++it) {
        const Entry& e = *it;
        if (e.state == State::kCompleted) continue;
        const auto& members = job.groups.count(e.group) ? job.groups.at(e.group) : std::vector<int>{};
        const bool involves = e.kind == "p2p" ? e.peer == gone
                                              : std::find(members.begin(), members.end(), gone) != members.end();
        if (!involves) continue;
        waits += "\n  rank " + std::to_string(rank) + " waits for it in " + name_of(e) + of_group(e) + with_site(e) +
                 ", " + state_text(*dump, e, /*with_error=*/false);
        f.waiting.push_back(rank);
        if (f.op.empty()) {
          f.op = e.op;
          f.seq = e.seq;
          f.group = e.kind == "collective" ? e.group : "";
        }
        break;
      }
    }
    f.text = how_it_left(job, gone) + (f.waiting.empty() ? std::string(": no other rank waits for it") : ":" + waits);
    out.push_back(f);
  }
}

}  // namespace distlab::flight::why
