#include "flight/why.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>
#include <sstream>

namespace distlab::flight {

std::string ranks_text(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  // Runs of three or more become "a-b": "ranks 0-2, 5".
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) text += ", ";
    if (j - i >= 2) {
      text += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
      i = j + 1;
    } else {
      text += std::to_string(ranks[i]);
      ++i;
    }
  }
  return text;
}

namespace {

// The job as the files show it.
struct Job {
  std::map<int, const Dump*> by_rank;
  int world_size = 0;
  std::map<std::string, std::vector<int>> groups;  // name -> members' job-wide ranks
  std::vector<int> missing;                        // ranks without a file
  std::set<int> dead;  // missing, or failed outside communication (its last operation had completed)

  // rank's collectives in `group`, oldest first.
  std::vector<const Entry*> collectives(int rank, const std::string& group) const {
    std::vector<const Entry*> out;
    auto it = by_rank.find(rank);
    if (it == by_rank.end()) return out;
    for (const Entry& e : it->second->entries)
      if (e.kind == "collective" && e.group == group) out.push_back(&e);
    return out;
  }
  const Entry* collective_at(int rank, const std::string& group, uint64_t seq) const {
    for (const Entry* e : collectives(rank, group))
      if (e->seq == seq) return e;
    return nullptr;
  }
  const Entry* last_entry(int rank) const {
    auto it = by_rank.find(rank);
    return it == by_rank.end() || it->second->entries.empty() ? nullptr : &it->second->entries.back();
  }
};

// "14:03:07.412": an entry's time on the wall clock of the rank that wrote it.
std::string clock_text(const Dump& dump, int64_t us) {
  const int64_t unix_us = dump.dumped_unix_us + (us - dump.dumped_us);
  const std::time_t seconds = static_cast<std::time_t>(unix_us / 1000000);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32];
  std::snprintf(text, sizeof text, "%02d:%02d:%02d.%03d", local.tm_hour, local.tm_min, local.tm_sec,
                static_cast<int>((unix_us / 1000) % 1000));
  return text;
}

// "completed at 14:03:07.398", "timed out at ...", "started at ..., not completed"
std::string state_text(const Dump& dump, const Entry& e, bool with_error = true) {
  switch (e.state) {
    case State::kCompleted: return "completed at " + clock_text(dump, e.ended_us);
    case State::kTimedOut: return "timed out at " + clock_text(dump, e.ended_us);
    case State::kFailed:
      return "failed at " + clock_text(dump, e.ended_us) + (e.error.empty() || !with_error ? "" : ": " + e.error);
    case State::kStarted: return "waiting since " + clock_text(dump, e.started_us);
    case State::kEntered: return "entered at " + clock_text(dump, e.entered_us) + ", not started";
  }
  return "";
}

std::string with_site(const Entry& e) { return e.site.empty() ? "" : " (" + e.site + ")"; }

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

// ------------------------------------------------------------------ dead

void find_dead(const Job& job, std::vector<Finding>& out) {
  for (int gone : job.dead) {
    Finding f;
    f.cause = "dead";
    f.culprits = {gone};
    std::string waits;
    for (const auto& [rank, dump] : job.by_rank) {
      for (auto it = dump->entries.rbegin(); it != dump->entries.rend(); ++it) {
        const Entry& e = *it;
        if (e.state == State::kCompleted) continue;
        const auto& members = job.groups.count(e.group) ? job.groups.at(e.group) : std::vector<int>{};
        const bool involves = e.kind == "p2p" ? e.peer == gone
                                              : std::find(members.begin(), members.end(), gone) != members.end();
        if (!involves) continue;
        waits += "\n  rank " + std::to_string(rank) + " waits for it in " + name_of(e) +
                 (e.kind == "collective" ? " of group " + e.group : "") + with_site(e) + ", " +
                 state_text(*dump, e, /*with_error=*/false);
        f.waiting.push_back(rank);
        if (f.op.empty()) {
          f.op = e.op;
          f.seq = e.seq;
          f.group = e.kind == "collective" ? e.group : "";
        }
        break;
      }
    }
    std::string left = "rank " + std::to_string(gone) +
                       " left the job without a flight file (killed, or exited before it could write one)";
    if (auto it = job.by_rank.find(gone); it != job.by_rank.end()) {
      const Dump& dump = *it->second;
      left = "rank " + std::to_string(gone) + " left the job (" + dump.exit + ")";
      if (const Entry* last = job.last_entry(gone))
        left += " after " + name_of(*last) + (last->kind == "collective" ? " of group " + last->group : "") + ", " +
                state_text(dump, *last);
    }
    f.text = left + (f.waiting.empty() ? std::string(": no other rank waits for it") : ":" + waits);
    out.push_back(f);
  }
}

// -------------------------------------------------------------- mismatch

// The first sequence number of `group` at which two members called
// different collectives; one finding per group (later ones are echoes).
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
    if (auto mine = job.collectives(r, group); !mine.empty()) {
      front = any ? std::max(front, mine.back()->seq) : mine.back()->seq;
      any = true;
    }
  if (!any) return;
  std::vector<int> in_it, behind, done_it;
  const Entry* example = nullptr;
  for (int r : members) {
    if (job.dead.count(r)) continue;  // find_dead speaks of it
    auto mine = job.collectives(r, group);
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
      auto mine = job.collectives(r, group);
      text += "; rank " + std::to_string(r) + " never entered it: ";
      text += mine.empty() ? "it has no collective of " + group + " on record"
                           : "its last operation in " + group + " was " + name_of(*mine.back()) +
                                 with_site(*mine.back()) + ", " + state_text(dump, *mine.back());
      const Entry* last = job.last_entry(r);
      if (last && (mine.empty() || last != mine.back()))
        text += "\n  rank " + std::to_string(r) + "'s last operation of all: " + name_of(*last) +
                (last->kind == "collective" ? " of group " + last->group : "") + with_site(*last) + ", " +
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

// ------------------------------------------------------------------- p2p

// The highest sequence number `rank` used for `op` with `peer` and `tag`; -1 for none.
int64_t highest_seq(const Dump& dump, const std::string& op, int peer, int tag) {
  int64_t most = -1;
  for (const Entry& e : dump.entries)
    if (e.kind == "p2p" && e.op == op && e.peer == peer && e.tag == tag) most = std::max(most, int64_t(e.seq));
  return most;
}

void find_p2p(const Job& job, const std::set<int>& explained, std::vector<Finding>& out) {
  for (const auto& [rank, dump] : job.by_rank) {
    if (explained.count(rank)) continue;
    for (const Entry& e : dump->entries) {
      if (e.kind != "p2p" || e.state == State::kCompleted) continue;
      auto peer = job.by_rank.find(e.peer);
      if (peer == job.by_rank.end() || job.dead.count(e.peer)) continue;  // find_dead speaks of it
      const std::string other = e.op == "recv" ? "send" : "recv";
      const int64_t theirs = highest_seq(*peer->second, other, rank, e.tag);
      Finding f;
      f.cause = "p2p";
      f.seq = e.seq;
      f.op = e.op;
      f.waiting = {rank};
      f.culprits = {e.peer};
      f.text = "rank " + std::to_string(rank) + " is in " + name_of(e) + with_site(e) + ", " + state_text(*dump, e);
      if (theirs < static_cast<int64_t>(e.seq)) {
        f.text += "; rank " + std::to_string(e.peer) + " never " + (other == "send" ? "sent" : "received") +
                  " it: " + (theirs < 0 ? "no " + other + (other == "send" ? " to" : " from") + " rank " +
                                              std::to_string(rank) + " with tag " + std::to_string(e.tag) + " on record"
                                        : "its last was #" + std::to_string(theirs));
        if (const Entry* last = job.last_entry(e.peer))
          f.text += "\n  rank " + std::to_string(e.peer) + "'s last operation: " + name_of(*last) +
                    (last->kind == "collective" ? " of group " + last->group : "") + with_site(*last) + ", " +
                    state_text(*peer->second, *last);
      } else {
        f.text += "; rank " + std::to_string(e.peer) + " did its side (#" + std::to_string(e.seq) + ")";
      }
      out.push_back(f);
      break;  // one per rank: its oldest unfinished message
    }
  }
}

}  // namespace

Diagnosis diagnose(const std::vector<Dump>& dumps) {
  Diagnosis d;
  Job job;
  for (const Dump& dump : dumps) {
    job.by_rank[dump.rank] = &dump;
    job.world_size = std::max(job.world_size, dump.world_size);
    for (const Group& g : dump.groups) job.groups[g.name] = g.ranks;
  }
  std::vector<int> have;
  for (int r = 0; r < job.world_size; ++r)
    if (job.by_rank.count(r))
      have.push_back(r);
    else
      job.missing.push_back(r);
  job.dead.insert(job.missing.begin(), job.missing.end());
  for (const auto& [rank, dump] : job.by_rank) {
    const Entry* last = job.last_entry(rank);
    if (dump->exit.rfind("failed", 0) == 0 && (last == nullptr || last->state == State::kCompleted))
      job.dead.insert(rank);
  }
  d.summary = "read " + std::to_string(dumps.size()) + " flight file(s)";
  if (!have.empty()) d.summary += ": " + ranks_text(have) + " of " + std::to_string(job.world_size);
  if (!job.missing.empty()) d.summary += "; none from " + ranks_text(job.missing);

  find_dead(job, d.findings);
  std::set<int> explained;
  for (const Finding& f : d.findings) explained.insert(f.waiting.begin(), f.waiting.end());
  for (const auto& [name, members] : job.groups) {
    const size_t before = d.findings.size();
    find_mismatch(job, name, members, d.findings);
    if (d.findings.size() == before) find_skip(job, name, members, explained, d.findings);
    for (size_t i = before; i < d.findings.size(); ++i)
      for (int r : d.findings[i].waiting) explained.insert(r);
  }
  for (const Finding& f : d.findings)
    for (int r : f.waiting) explained.insert(r);
  find_p2p(job, explained, d.findings);
  if (d.findings.empty()) {
    Finding f;
    f.cause = "none";
    f.text = "no rank is waiting: every recorded operation completed";
    d.findings.push_back(f);
  }
  return d;
}

namespace {
bool is_directory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
// flight.rank<N>.json in `dir`, by rank.
std::vector<std::string> flight_files_in(const std::string& dir) {
  std::map<int, std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* entry = readdir(d)) {
      int rank = -1;
      char tail[8] = {};
      if (std::sscanf(entry->d_name, "flight.rank%d.%5s", &rank, tail) == 2 && std::string(tail) == "json" &&
          rank >= 0)
        files[rank] = dir + "/" + entry->d_name;
    }
    closedir(d);
  }
  std::vector<std::string> out;
  for (auto& [rank, path] : files) out.push_back(path);
  return out;
}
}  // namespace

Diagnosis diagnose_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files, refused;
  for (const std::string& p : paths) {
    if (!is_directory(p)) {
      files.push_back(p);
      continue;
    }
    auto found = flight_files_in(p);
    if (found.empty()) refused.push_back(p + ": no flight.rank<N>.json files in this directory");
    files.insert(files.end(), found.begin(), found.end());
  }
  std::vector<Dump> dumps;
  for (const std::string& f : files) {
    try {
      dumps.push_back(read_dump(f));
    } catch (const BadDump& e) {
      refused.push_back(e.what());
    }
  }
  Diagnosis d = diagnose(dumps);
  d.refused = refused;
  return d;
}

std::string to_text(const Diagnosis& d) {
  std::ostringstream out;
  out << d.summary << "\n";
  for (const std::string& line : d.refused) out << "refused " << line << "\n";
  for (const Finding& f : d.findings) out << f.text << "\n";
  return out.str();
}

}  // namespace distlab::flight
