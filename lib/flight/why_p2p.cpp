// The "p2p" finding of distlab-trace why: a rank waits in a recv (send)
// whose peer never sent (received) that message. Messages of one (peer,
// tag) pair are numbered alike on both sides (entry.hpp), so recv #2 from
// rank 3 (tag 0) waits for rank 3's send #2 to it with tag 0.
#include <algorithm>

#include "flight/why_job.hpp"

namespace distlab::flight::why {

namespace {

// The highest sequence number `rank` used for `op` with `peer` and `tag`; -1 for none.
int64_t highest_seq(const Dump& dump, const std::string& op, int peer, int tag) {
  int64_t most = -1;
  for (const Entry& e : dump.entries)
    if (e.kind == "p2p" && e.op == op && e.peer == peer && e.tag == tag) most = std::max(most, int64_t(e.seq));
  return most;
}

// The newest `op` of `dump` with `peer` under another tag than `tag`: the
// message the program may have meant.
const Entry* other_tag(const Dump& dump, const std::string& op, int peer, int tag) {
  for (auto it = dump.entries.rbegin(); it != dump.entries.rend(); ++it)
    if (it->kind == "p2p" && it->op == op && it->peer == peer && it->tag != tag) return &*it;
  return nullptr;
}

// rank's message to speak of: its oldest unfinished one that the peer never
// matched, else its oldest unfinished one. An isend that was never waited
// for stays "entered" although its peer took it; the wait that failed is a
// later entry.
const Entry* waiting_message(const Job& job, int rank, const Dump& dump) {
  const Entry* oldest = nullptr;
  for (const Entry& e : dump.entries) {
    if (e.kind != "p2p" || e.state == State::kCompleted) continue;
    auto peer = job.by_rank.find(e.peer);
    if (peer == job.by_rank.end() || job.dead.count(e.peer)) continue;  // find_dead speaks of it
    if (!oldest) oldest = &e;
    if (highest_seq(*peer->second, e.op == "recv" ? "send" : "recv", rank, e.tag) < static_cast<int64_t>(e.seq))
      return &e;
  }
  return oldest;
}

}  // namespace

void find_p2p(const Job& job, const std::set<int>& explained, std::vector<Finding>& out) {
  for (const auto& [rank, dump] : job.by_rank) {
    if (explained.count(rank) || job.dead.count(rank)) continue;  // a rank that left waits for nothing
    const Entry* waiting = waiting_message(job, rank, *dump);
    if (!waiting) continue;
    const Entry& e = *waiting;
    const Dump& theirs = *job.by_rank.at(e.peer);
    const std::string other = e.op == "recv" ? "send" : "recv";
    const std::string toward = other == "send" ? " to" : " from";
    const std::string me = "rank " + std::to_string(rank);
    const std::string them = "rank " + std::to_string(e.peer);
    const int64_t done = highest_seq(theirs, other, rank, e.tag);
    Finding f;
    f.cause = "p2p";
    f.seq = e.seq;
    f.op = e.op;
    f.waiting = {rank};
    f.culprits = {e.peer};
    f.text = me + " is in " + name_of(e) + with_site(e) + ", " + state_text(*dump, e);
    if (done < static_cast<int64_t>(e.seq)) {
      f.text += "; " + them + " never " + (other == "send" ? "sent" : "received") + " it: " +
                (done < 0 ? "no " + other + toward + " " + me + " with tag " + std::to_string(e.tag) + " on record"
                          : "its last " + other + toward + " " + me + " with tag " + std::to_string(e.tag) + " was #" +
                                std::to_string(done));
      const Entry* last = job.last_entry(e.peer);
      if (const Entry* mistagged = other_tag(theirs, other, rank, e.tag); mistagged && mistagged != last)
        f.text += "\n  " + them + "'s last " + other + toward + " " + me + " has another tag: " + name_of(*mistagged) +
                  with_site(*mistagged) + ", " + state_text(theirs, *mistagged, /*with_error=*/false);
      if (last)
        f.text += "\n  " + them + "'s last operation: " + name_of(*last) + of_group(*last) + with_site(*last) + ", " +
                  state_text(theirs, *last);
    } else {
      f.text += "; " + them + " did its side (#" + std::to_string(e.seq) + ")";
    }
    out.push_back(f);
  }
}

}  // namespace distlab::flight::why
