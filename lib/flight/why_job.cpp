// The job as distlab-trace why sees it, and the words its findings share
// (why_job.hpp).
#include "flight/why_job.hpp"

#include <cstdio>
#include <ctime>

namespace distlab::flight::why {

void Job::index() {
  collectives_.clear();
  by_seq_.clear();
  for (const auto& [rank, dump] : by_rank)
    for (const Entry& e : dump->entries) {
      if (e.kind != "collective") continue;
      collectives_[{rank, e.group}].push_back(&e);
      by_seq_[{rank, e.group}][e.seq] = &e;
    }
}

const std::vector<const Entry*>& Job::collectives(int rank, const std::string& group) const {
  static const std::vector<const Entry*> none;
  auto it = collectives_.find({rank, group});
  return it == collectives_.end() ? none : it->second;
}

const Entry* Job::collective_at(int rank, const std::string& group, uint64_t seq) const {
  auto it = by_seq_.find({rank, group});
  if (it == by_seq_.end()) return nullptr;
  auto at = it->second.find(seq);
  return at == it->second.end() ? nullptr : at->second;
}

const Entry* Job::last_entry(int rank) const {
  auto it = by_rank.find(rank);
  return it == by_rank.end() || it->second->entries.empty() ? nullptr : &it->second->entries.back();
}

const ExitRecord* Job::exit_of(int rank) const {
  auto it = exits.find(rank);
  return it == exits.end() ? nullptr : it->second;
}

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

std::string state_text(const Dump& dump, const Entry& e, bool with_error) {
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

std::string of_group(const Entry& e) { return e.kind == "collective" ? " of group " + e.group : ""; }

std::string exit_text(const ExitRecord& record) {
  return describe(record) + (record.asked_to_stop ? ", after distlab-run asked it to stop" : "");
}

}  // namespace distlab::flight::why
