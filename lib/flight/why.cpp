// distlab-trace why (why.hpp): the job lined up from the files, the
// findings in their order (each kind in its own why_*.cpp), the files read.
#include "flight/why.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "flight/why_job.hpp"

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

using why::Job;

// A rank is dead (why_job.hpp) when it has no file; when it left on its own
// while outside communication (no operation of its ended in an error or a
// timeout, and its last one completed): its work failed, or distlab-run saw
// it end abnormally before being asked to stop; or when a signal nobody
// asked for killed it, whatever it was doing (a crash, an OOM kill, kill -9).
bool left_on_its_own(const Job& job, int rank, const Dump& dump) {
  const Entry* last = job.last_entry(rank);
  const ExitRecord* record = job.exit_of(rank);
  const bool idle = (last == nullptr || last->state == State::kCompleted) &&
                    std::none_of(dump.entries.begin(), dump.entries.end(), [](const Entry& e) {
                      return e.state == State::kFailed || e.state == State::kTimedOut;
                    });
  const bool unasked = record != nullptr && !record->asked_to_stop;
  return (idle && (dump.exit.rfind("failed", 0) == 0 || unasked)) || (unasked && !record->signal.empty());
}

Finding all_completed() {
  Finding f;
  f.cause = "none";
  f.text = "no rank is waiting: every recorded operation completed";
  return f;
}

// Nothing read is no evidence of a healthy job: say where the files were
// looked for and what puts them there.
Finding no_files(const std::vector<std::string>& paths) {
  std::string where;
  for (const std::string& p : paths) where += (where.empty() ? " in " : ", ") + p;
  Finding f;
  f.cause = "no files";
  f.text = "no flight file found" + where +
           ": ranks write flight.rank<N>.json when a wait times out, a rank fails or gets SIGUSR1, into "
           "DISTLAB_FLIGHT_DIR (lesson 14: --flight-dir DIR), else beside the --trace file, else the working "
           "directory; point distlab-trace why at that folder";
  return f;
}

// "exits seen by distlab-run: rank 2 (killed by SIGKILL, exit 137); ranks
// 0, 1 (killed by SIGTERM, exit 143) after distlab-run asked them to stop":
// alike exits together, the earliest first.
std::string exits_text(const Job& job) {
  struct Alike {
    std::vector<int> ranks;
    int64_t first_us = 0;
    const ExitRecord* example = nullptr;
  };
  std::map<std::string, Alike> alike;
  for (const auto& [rank, record] : job.exits) {
    Alike& a = alike[describe(*record) + (record->asked_to_stop ? "|asked" : "")];
    if (a.ranks.empty() || record->unix_us < a.first_us) a.first_us = record->unix_us;
    a.ranks.push_back(rank);
    a.example = record;
  }
  std::vector<const Alike*> order;
  for (const auto& [key, a] : alike) order.push_back(&a);
  std::sort(order.begin(), order.end(), [](const Alike* x, const Alike* y) { return x->first_us < y->first_us; });
  std::string text;
  for (const Alike* a : order)
    text += std::string(text.empty() ? "exits seen by distlab-run: " : "; ") + ranks_text(a->ranks) + " (" +
            describe(*a->example) + ")" +
            (a->example->asked_to_stop
                 ? std::string(" after distlab-run asked ") + (a->ranks.size() == 1 ? "it" : "them") + " to stop"
                 : "");
  return text;
}

}  // namespace

Diagnosis diagnose(const std::vector<Dump>& dumps, const std::vector<ExitRecord>& exits) {
  Diagnosis d;
  Job job;
  for (const Dump& dump : dumps) {
    job.by_rank[dump.rank] = &dump;
    job.world_size = std::max(job.world_size, dump.world_size);
    for (const Group& g : dump.groups) job.groups[g.name] = g.ranks;
  }
  job.index();
  for (const ExitRecord& record : exits) {
    auto dump = job.by_rank.find(record.rank);
    const std::string whose = "exit record of rank " + std::to_string(record.rank) + " (pid " +
                              std::to_string(record.pid) + ")";
    if (dump != job.by_rank.end() && dump->second->pid != record.pid)
      d.refused.push_back(whose + ": its flight file was written by pid " + std::to_string(dump->second->pid) +
                          ", so one of them is from another run or restart; the record is not used");
    else if (!dumps.empty() && record.world_size != job.world_size)
      d.refused.push_back(whose + ": world size " + std::to_string(record.world_size) + ", the flight files' is " +
                          std::to_string(job.world_size) + "; not used (from another run?)");
    else
      job.exits[record.rank] = &record;
  }
  for (const auto& [rank, record] : job.exits) job.world_size = std::max(job.world_size, record->world_size);
  std::vector<int> have;
  for (int r = 0; r < job.world_size; ++r)
    if (job.by_rank.count(r))
      have.push_back(r);
    else
      job.missing.push_back(r);
  job.dead.insert(job.missing.begin(), job.missing.end());
  for (const auto& [rank, dump] : job.by_rank)
    if (left_on_its_own(job, rank, *dump)) job.dead.insert(rank);
  d.summary = "read " + std::to_string(dumps.size()) + " flight file(s)";
  if (!have.empty()) d.summary += ": " + ranks_text(have) + " of " + std::to_string(job.world_size);
  if (!job.missing.empty()) d.summary += "; none from " + ranks_text(job.missing);
  d.exits = exits_text(job);

  // A mismatch first: seen in the files of both sides, it is never an echo
  // of a rank that left, and it is often why one did (gloo aborts a process
  // that receives a longer message than it asked for).
  std::set<std::string> mismatched;
  for (const auto& [name, members] : job.groups) {
    const size_t before = d.findings.size();
    why::find_mismatch(job, name, members, d.findings);
    if (d.findings.size() > before) mismatched.insert(name);
  }
  why::find_dead(job, d.findings);
  std::set<int> explained;
  for (const Finding& f : d.findings) explained.insert(f.waiting.begin(), f.waiting.end());
  for (const auto& [name, members] : job.groups) {
    if (mismatched.count(name)) continue;
    const size_t before = d.findings.size();
    why::find_skip(job, name, members, explained, d.findings);
    for (size_t i = before; i < d.findings.size(); ++i)
      for (int r : d.findings[i].waiting) explained.insert(r);
  }
  for (const Finding& f : d.findings)
    for (int r : f.waiting) explained.insert(r);
  why::find_p2p(job, explained, d.findings);
  if (d.findings.empty()) d.findings.push_back(dumps.empty() ? no_files({}) : all_completed());
  return d;
}

namespace {
bool is_directory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
// flight.rank<N>.json (dumps) and flight.rank<N>.exit.json (exit records)
// in `dir`, by rank; temporary files of a write under way are neither.
void flight_files_in(const std::string& dir, std::vector<std::string>& dumps, std::vector<std::string>& exits) {
  std::map<int, std::string> found_dumps, found_exits;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      int rank = -1;
      int used = 0;
      if (std::sscanf(name.c_str(), "flight.rank%d.json%n", &rank, &used) == 1 && rank >= 0 &&
          static_cast<size_t>(used) == name.size())
        found_dumps[rank] = dir + "/" + name;
      else if (is_exit_path(name))
        found_exits[std::stoi(name.substr(11))] = dir + "/" + name;
    }
    closedir(d);
  }
  for (auto& [rank, path] : found_dumps) dumps.push_back(path);
  for (auto& [rank, path] : found_exits) exits.push_back(path);
}
}  // namespace

std::vector<std::string> flight_files_in(const std::string& dir) {
  std::vector<std::string> dumps, exits;
  if (!dir.empty()) flight_files_in(dir, dumps, exits);
  return dumps;
}

FlightFiles read_flight_files(const std::vector<std::string>& paths) {
  FlightFiles out;
  out.paths = paths;
  std::vector<std::string> files, exit_files;
  for (const std::string& p : paths) {
    if (!is_directory(p)) {
      (is_exit_path(p) ? exit_files : files).push_back(p);
      continue;
    }
    const size_t before = files.size();
    flight_files_in(p, files, exit_files);
    if (files.size() == before) out.refused.push_back(p + ": no flight.rank<N>.json files in this directory");
  }
  for (const std::string& f : files) {
    try {
      out.dumps.push_back(read_dump(f));
    } catch (const BadDump& e) {
      out.refused.push_back(e.what());
    }
  }
  for (const std::string& f : exit_files) {
    try {
      out.exits.push_back(read_exit(f));
    } catch (const BadDump& e) {
      out.refused.push_back(e.what());
    }
  }
  return out;
}

Diagnosis diagnose(const FlightFiles& files) {
  Diagnosis d = diagnose(files.dumps, files.exits);
  std::vector<std::string> refused = files.refused;
  refused.insert(refused.end(), d.refused.begin(), d.refused.end());
  d.refused = std::move(refused);
  if (files.dumps.empty() && d.findings.size() == 1 && d.findings.front().cause == "no files")
    d.findings.front() = no_files(files.paths);
  return d;
}

Diagnosis diagnose_files(const std::vector<std::string>& paths) { return diagnose(read_flight_files(paths)); }

std::string to_text(const Diagnosis& d) {
  std::ostringstream out;
  out << d.summary << "\n";
  for (const std::string& line : d.refused) out << "refused " << line << "\n";
  if (!d.exits.empty()) out << d.exits << "\n";
  for (const Finding& f : d.findings) out << f.text << "\n";
  return out.str();
}

}  // namespace distlab::flight
