#include "flight/recorder.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "flight/exit_file.hpp"
#include "trace/clock.hpp"

namespace distlab::flight {

std::string files_dir(const std::string& trace_file) {
  if (const char* where = std::getenv("DISTLAB_FLIGHT_DIR"); where != nullptr && *where != '\0') return where;
  const size_t slash = trace_file.rfind('/');
  if (trace_file.empty() || slash == std::string::npos) return ".";
  return slash == 0 ? "/" : trace_file.substr(0, slash);
}

RecorderOptions RecorderOptions::from_env(const std::string& dir) {
  RecorderOptions options;
  options.dir = dir;
  if (const char* text = std::getenv("DISTLAB_FLIGHT_ENTRIES")) {
    char* end = nullptr;
    const long long n = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || n < 0)
      throw std::invalid_argument(std::string("DISTLAB_FLIGHT_ENTRIES must be a number >= 0 (0 = off), got '") +
                                  text + "'");
    options.entries = static_cast<size_t>(n);
  }
  if (const char* where = std::getenv("DISTLAB_FLIGHT_DIR"); where != nullptr && *where != '\0') options.dir = where;
  return options;
}

// ------------------------------------------------------------------- Ring

Ring::Ring(int rank, int world_size, size_t capacity) : rank_(rank), world_size_(world_size), capacity_(capacity) {}

uint64_t Ring::enter(Entry entry) {
  entry.entered_us = trace::now_us();
  std::lock_guard<std::mutex> lock(mutex_);
  entry.id = next_id_++;
  if (slots_.size() < capacity_)
    slots_.push_back(std::move(entry));
  else
    slots_[entry.id % capacity_] = std::move(entry);  // the oldest goes
  return next_id_ - 1;
}

Entry* Ring::find(uint64_t id) {
  if (capacity_ == 0) return nullptr;
  Entry& slot = slots_[id % capacity_];
  return id < next_id_ && slot.id == id ? &slot : nullptr;  // nullptr: overwritten since
}

void Ring::start(uint64_t id) {
  const int64_t now = trace::now_us();
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = find(id); e != nullptr && e->state == State::kEntered) {
    e->state = State::kStarted;
    e->started_us = now;
  }
}

void Ring::end(uint64_t id, State state, const std::string& error) {
  const int64_t now = trace::now_us();
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = find(id); e != nullptr && !e->done()) {
    if (e->started_us == 0) e->started_us = now;
    e->state = state;
    e->ended_us = now;
    e->error = error.substr(0, error.find('\n'));
  }
}

void Ring::add_group(const std::string& name, const std::vector<int>& world_ranks) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Group& g : groups_)
    if (g.name == name) return;
  groups_.push_back({name, world_ranks});
}

void Ring::set_exit(const std::string& how) {
  std::lock_guard<std::mutex> lock(mutex_);
  exit_ = how.substr(0, how.find('\n'));
}

Dump Ring::snapshot() const {
  Dump dump;
  dump.rank = rank_;
  dump.world_size = world_size_;
  dump.capacity = capacity_;
  std::lock_guard<std::mutex> lock(mutex_);
  dump.recorded = next_id_;
  dump.groups = groups_;
  dump.exit = exit_;
  dump.entries.reserve(slots_.size());
  // Oldest first: once full, the oldest lives just after the newest.
  const size_t first = slots_.size() < capacity_ ? 0 : next_id_ % capacity_;
  for (size_t k = 0; k < slots_.size(); ++k) dump.entries.push_back(slots_[(first + k) % slots_.size()]);
  return dump;
}

// --------------------------------------------------------------- Recorder

namespace {
std::mutex live_mutex;
std::vector<std::weak_ptr<Recorder>>& live() {
  static std::vector<std::weak_ptr<Recorder>> recorders;
  return recorders;
}
// Two ranks of one process failing at once both dump; one at a time keeps
// their temporary files apart.
std::mutex dump_mutex;

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? name : "";
}
}  // namespace

std::shared_ptr<Recorder> Recorder::create(RecorderOptions options) {
  if (options.entries > 0) note_flight_dir(options.dir);  // for the launcher's exit records
  std::shared_ptr<Recorder> recorder(new Recorder(std::move(options)));
  std::lock_guard<std::mutex> lock(live_mutex);
  auto& all = live();
  for (size_t i = 0; i < all.size();)
    if (all[i].expired())
      all.erase(all.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  all.push_back(recorder);
  return recorder;
}

std::shared_ptr<Ring> Recorder::ring_of(int world_rank, int world_size) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& ring = rings_[world_rank];
  if (!ring) ring = std::make_shared<Ring>(world_rank, world_size, options_.entries);
  return ring;
}

std::vector<std::string> Recorder::dump(const std::string& reason) {
  std::vector<std::shared_ptr<Ring>> rings;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [rank, ring] : rings_)
      if (ring->on()) rings.push_back(ring);
  }
  std::vector<std::string> written;
  std::lock_guard<std::mutex> lock(dump_mutex);
  for (const auto& ring : rings) {
    Dump dump = ring->snapshot();
    dump.reason = reason.substr(0, reason.find('\n'));
    dump.pid = static_cast<int>(getpid());
    dump.host = host_name();
    dump.dumped_us = trace::now_us();
    dump.dumped_unix_us = trace::unix_us_of(dump.dumped_us);  // one offset per process: dates agree across dumps
    const std::string path = dump_path(options_.dir, dump.rank);
    try {
      write_dump(dump, path);
      written.push_back(path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "distlab: flight recorder: %s\n", e.what());
    }
  }
  return written;
}

std::vector<std::string> dump_all(const std::string& reason) {
  std::vector<std::shared_ptr<Recorder>> recorders;
  {
    std::lock_guard<std::mutex> lock(live_mutex);
    for (auto& weak : live())
      if (auto r = weak.lock()) recorders.push_back(r);
  }
  std::vector<std::string> written;
  for (auto& r : recorders)
    for (auto& path : r->dump(reason)) written.push_back(path);
  return written;
}

}  // namespace distlab::flight
