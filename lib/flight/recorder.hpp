// The flight recorder: every rank keeps its last N communication operations
// (entry.hpp), cheaply enough to stay on, and writes them out when something
// goes wrong, so that distlab-trace why (why.hpp) can tell from all ranks'
// files who is waiting for whom and why.
//
// Ownership. A Recorder belongs to a job as seen from one process: the
// communicators of the job share it through CommOptions::flight, groups made
// by split() included. It keeps one Ring per job-wide rank living in this
// process: one under gloo and nccl, N under the threads backend, where the
// N thread ranks share the process but never a ring (each ring has its own
// mutex, so ranks do not contend). A dump writes one file per ring, so every
// thread rank gets its file even when only one of them timed out.
//
// When it is written (see comm/flight_op.hpp and comm/job.cpp):
// - a wait timed out or failed, or the job aborted (the operation's own
//   record is marked first, then the files are written);
// - a rank's body threw (run_job: a failed exit);
// - the process got SIGUSR1 (dump and go on) or SIGTERM (dump, then die of
//   it as before), or an exception reached std::terminate, once
//   dump_on_signals() was called. distlab-run's
//   survivors get SIGTERM when a peer dies, so their files tell what they
//   were waiting for even when the peer was SIGKILLed.
//
// Settings: DISTLAB_FLIGHT_ENTRIES (per rank, default 2000; 0 turns the
// recorder off), DISTLAB_FLIGHT_DIR (where the files go; default next to the
// trace file when tracing to a file, else the working directory).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flight/dump_file.hpp"
#include "flight/entry.hpp"

namespace distlab::flight {

inline constexpr size_t kDefaultEntries = 2000;

// Where a job's flight files go: DISTLAB_FLIGHT_DIR when set, else the
// directory of `trace_file` (the --trace flag or DISTLAB_TRACE, as given,
// "{rank}" and all) when it names one, else ".". run_job (comm/job.cpp) and
// distlab-run (its exit records, exit_file.hpp) both follow this rule, so
// the launcher's files land beside the workers'.
std::string files_dir(const std::string& trace_file);

struct RecorderOptions {
  size_t entries = kDefaultEntries;  // per rank; 0 = off
  std::string dir = ".";
  // DISTLAB_FLIGHT_ENTRIES and DISTLAB_FLIGHT_DIR; `dir` when the latter is
  // unset. Throws std::invalid_argument for a bad number.
  static RecorderOptions from_env(const std::string& dir = ".");
};

// One rank's last `capacity` operations. Thread-safe (a mutex each).
class Ring {
 public:
  Ring(int rank, int world_size, size_t capacity);

  int rank() const { return rank_; }
  bool on() const { return capacity_ > 0 && !paused_; }
  // Stops and resumes recording (distlab-bench flight times a step both ways).
  void set_paused(bool paused) { paused_ = paused; }
  // Records a new operation; sets its id and entered_us. Returns the id.
  uint64_t enter(Entry entry);
  // Moves operation `id` on, if the ring still holds it.
  void start(uint64_t id);
  void end(uint64_t id, State state, const std::string& error = "");
  // Called by each communicator this rank holds, so that the dump lists
  // every group with its members even before it has any traffic.
  void add_group(const std::string& name, const std::vector<int>& world_ranks);
  // How the rank's work ended: "returned" or "failed: <error>" (run_job,
  // run_thread_ranks). A rank that left while others wait for it is the
  // cause of their wait.
  void set_exit(const std::string& how);
  // What the ring holds now, oldest first (reason and times left empty).
  Dump snapshot() const;

 private:
  Entry* find(uint64_t id);

  const int rank_;
  const int world_size_;
  const size_t capacity_;
  std::atomic<bool> paused_{false};
  mutable std::mutex mutex_;
  std::vector<Entry> slots_;  // grows to capacity_, then entry id lives in slots_[id % capacity_]
  uint64_t next_id_ = 0;
  std::vector<Group> groups_;
  std::string exit_;
};

class Recorder {
 public:
  // A recorder that dump_all() (signals) can find while it lives.
  static std::shared_ptr<Recorder> create(RecorderOptions options = RecorderOptions::from_env());

  const RecorderOptions& options() const { return options_; }
  // The ring of `world_rank`, made on first use.
  std::shared_ptr<Ring> ring_of(int world_rank, int world_size);
  // Writes flight.rank<N>.json for every ring into options().dir; returns the
  // paths written. Never throws: a failure is one line on stderr.
  std::vector<std::string> dump(const std::string& reason);

 private:
  explicit Recorder(RecorderOptions options) : options_(std::move(options)) {}

  RecorderOptions options_;
  std::mutex mutex_;
  std::map<int, std::shared_ptr<Ring>> rings_;
};

// Dumps every recorder alive in this process.
std::vector<std::string> dump_all(const std::string& reason);

// From now on SIGUSR1 dumps every recorder (and the process goes on), and
// SIGTERM dumps them and then ends the process by SIGTERM as before. The
// handler only writes a byte to a pipe; a watcher thread does the dumping
// (file I/O and locks are not allowed in a signal handler). An exception
// nobody catches dumps them too, before std::terminate's abort (gloo's I/O
// threads throw one for a message longer than its recv). Nothing is dumped
// once the process has begun to exit. Idempotent.
void dump_on_signals();

}  // namespace distlab::flight
