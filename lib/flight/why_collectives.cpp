// The findings of distlab-trace why about one group's collectives, lined
// up by sequence number (entry.hpp): "order" and "shape" (two members
// called different collectives, or the same one with another dtype or
// element count, at one number), "skip" (members never entered the one the
// others are in) and "stuck" (all entered it, some never finished).
#include <algorithm>

#include "flight/why_job.hpp"

namespace distlab::flight::why {

namespace {

// What must agree across ranks for a collective to match.
std::string fingerprint(const Entry& e) {
  int64_t count = 1;
  for (int64_t d : e.shape) count *= d;
  return e.op + "|" + e.algorithm + "|" + e.dtype + "|" + std::to_string(count) + "|" + std::to_string(e.root);
}

std::string call_text(const Entry& e) {
  std::string text = e.op + " " + shape_text(e);
  if (e.root >= 0) text += " root " + std::to_string(e.root);
  if (!e.algorithm.empty()) text += " (" + e.algorithm + ")";
  return text;
}

}  // namespace

// -------------------------------------------------------------- mismatch

void find_mismatch(const Job& job, const std::string& group, const std::vector<int>& members,
                   std::vector<Finding>& out) {
  std::set<uint64_t> seqs;
  for (int r : members)
    for (const Entry* e : job.collectives(r, group)) seqs.insert(e->seq);
  for (uint64_t seq : seqs) {
    std::map<std::string, std::vector<int>> classes;  // fingerprint -> ranks
    std::map<std::string, const Entry*> example;
    for (int r : members)
      if (const Entry* e = job.collective_at(r, group, seq)) {
        classes[fingerprint(*e)].push_back(r);
        example[fingerprint(*e)] = e;
      }
    if (classes.size() < 2) continue;
    // The majority is taken as what the program meant; ties go to the class
    // of the lowest rank.
    std::string major;
    for (const auto& [key, ranks] : classes)
      if (major.empty() || ranks.size() > classes[major].size() ||
          (ranks.size() == classes[major].size() && ranks.front() < classes[major].front()))
        major = key;
    const Entry& want = *example[major];
    std::string line = "collective mismatch at #" + std::to_string(seq) + " of group " + group + ": " +
                       ranks_text(classes[major]) + " " + call_text(want);
    Finding f;
    f.group = group;
    f.seq = seq;
    f.op = want.op;
    f.waiting = classes[major];
    std::string why;
    for (const auto& [key, ranks] : classes) {
      if (key == major) continue;
      const Entry& got = *example[key];
      line += ", " + ranks_text(ranks) + " " + call_text(got);
      f.culprits.insert(f.culprits.end(), ranks.begin(), ranks.end());
      const std::string who = ranks_text(ranks);
      if (got.op != want.op) {
        f.cause = "order";
        // Swapped with the next one, on either side?
        const Entry* their_next = job.collective_at(ranks.front(), group, seq + 1);
        const Entry* our_next = job.collective_at(classes[major].front(), group, seq + 1);
        if ((their_next && fingerprint(*their_next) == major) || (our_next && fingerprint(*our_next) == key))
          why += "\n  " + who + " called two collectives in another order: " + got.op + " #" + std::to_string(seq) +
                 " then " + want.op + " #" + std::to_string(seq + 1) + ", where the others call " + want.op +
                 " first";
        else
          why += "\n  " + who + " called " + got.op + with_site(got) + " where the others call " + want.op +
                 with_site(want) + ": collectives called in another order, or one skipped";
      } else if (got.dtype != want.dtype || fingerprint(got) != fingerprint(want)) {
        const bool other_shape = got.dtype != want.dtype || got.shape != want.shape;
        f.cause = other_shape ? "shape" : "mismatch";
        why += "\n  " + who + " passed " + (other_shape ? "another dtype or shape" : "another root or algorithm") +
               " to " + got.op + " #" + std::to_string(seq) + with_site(got) + "; every rank must pass the same";
      }
    }
    f.text = line + why;
    out.push_back(f);
    return;
  }
}

// ------------------------------------------------------------------ skip

void find_skip(const Job& job, const std::string& group, const std::vector<int>& members,
               const std::set<int>& explained, std::vector<Finding>& out) {
  uint64_t front = 0;
  bool any = false;
  for (int r : members)
    if (const auto& mine = job.collectives(r, group); !mine.empty()) {
      front = any ? std::max(front, mine.back()->seq) : mine.back()->seq;
      any = true;
    }
  if (!any) return;
  std::vector<int> in_it, behind, done_it;
  const Entry* example = nullptr;
  for (int r : members) {
    if (job.dead.count(r)) continue;  // find_dead speaks of it
    const auto& mine = job.collectives(r, group);
    if (mine.empty() || mine.back()->seq < front) {
      behind.push_back(r);
    } else if (mine.back()->state != State::kCompleted) {
      in_it.push_back(r);
      if (!example) example = mine.back();
    } else {
      done_it.push_back(r);
    }
  }
  // Waiting for a rank that left: find_dead said so already.
  const bool all_explained = std::all_of(in_it.begin(), in_it.end(), [&](int r) { return explained.count(r) > 0; });
  if (in_it.empty() || (behind.empty() && all_explained)) return;
  const Dump& first = *job.by_rank.at(in_it.front());
  Finding f;
  f.group = group;
  f.seq = front;
  f.op = example->op;
  f.waiting = in_it;
  std::string text = ranks_text(in_it) + (in_it.size() == 1 ? " is" : " are") + " in " + name_of(*example) +
                     with_site(*example) + " of group " + group + " since " + clock_text(first, example->entered_us);
  if (!behind.empty()) {
    f.cause = "skip";
    f.culprits = behind;
    for (int r : behind) {
      const Dump& dump = *job.by_rank.at(r);
      const auto& mine = job.collectives(r, group);
      text += "; rank " + std::to_string(r) + " never entered it: ";
      text += mine.empty() ? "it has no collective of " + group + " on record"
                           : "its last operation in " + group + " was " + name_of(*mine.back()) +
                                 with_site(*mine.back()) + ", " + state_text(dump, *mine.back());
      const Entry* last = job.last_entry(r);
      if (last && (mine.empty() || last != mine.back()))
        text += "\n  rank " + std::to_string(r) + "'s last operation of all: " + name_of(*last) +
                of_group(*last) + with_site(*last) + ", " +
                state_text(dump, *last);
      if (dump.exit == "returned") text += "; then it returned from its work";
    }
  } else {
    f.cause = "stuck";
    f.culprits = done_it;
    text += done_it.empty() ? "; every member entered it and none finished"
                            : "; " + ranks_text(done_it) + " completed it";
    if (example->state == State::kFailed || example->state == State::kTimedOut)
      text += "\n  rank " + std::to_string(in_it.front()) + ": " + state_text(first, *example);
  }
  f.text = text;
  out.push_back(f);
}

}  // namespace distlab::flight::why
