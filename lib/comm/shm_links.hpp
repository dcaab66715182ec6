// The same-host transport: ranks of one job on one host talk through POSIX
// shared memory instead of TCP (comm/same_host_backend.hpp puts it beneath
// the gloo backend; ranks on other hosts still go through gloo's TCP).
//
// Per communicator (the job's, and each group split off it), every rank
// creates one segment holding, for each member on its host, the ring that
// member writes to it (comm/shm_sync.hpp), plus a slot of the arena its
// native collectives reduce in. A message is a header in the ring and then:
//
// - two copies: its bytes follow the header through the ring, in chunks, the
//   sender copying in while the receiver copies out;
// - one copy, from single_copy_from bytes on (4 MiB): the header carries
//   the sender's address and the receiver reads the bytes straight out of
//   the sender's memory (process_vm_readv, Linux's cross-memory attach),
//   then acknowledges, which completes the send. Taken only where a probe
//   at start-up could read the peer (ptrace rules allow it); else two
//   copies. Below 4 MiB two copies measured faster (docs/benchmarks-wire.md):
//   the chunks stay in the caches and both cores copy at once.
//
// Nobody has a thread spinning on the rings: whoever waits (a Work's
// wait(), a collective) moves every pending message of the process forward
// itself, polls for `spin`, then sleeps on its process's Bell until a peer
// rings it. A background thread moves messages nobody waits for (an isend
// whose receiver needs the ring emptied while this rank computes) every
// millisecond. Every wait is bounded by the timeout and names the peer, and
// a peer whose process has exited is reported at once.
//
// In three files: shm_process.cpp (ShmProcess: the Bell, the probe, the
// waits, the background thread), shm_links.cpp (a communicator's rings and
// its sends and recvs), shm_arena.cpp (its native collectives) and
// shm_direct.cpp (the large ones in one copy, no arena), with the
// shared-memory layout they share in shm_internal.hpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/shm_internal.hpp"
#include "comm/shm_segment.hpp"
#include "comm/shm_sync.hpp"

namespace c10d {
class Store;
}

namespace distlab::comm {

// What this process's one-copy path has done, counted process-wide (a
// rank is a process here): all-reduces of parts done where the parts lie
// (DDP's buckets with no buffer, shm_direct.cpp) and the bytes read
// straight out of other ranks' memory (process_vm_readv). For the tests
// and benchmarks that show which path ran and what it copied.
struct OneCopyCounts {
  int64_t parts_all_reduces = 0;
  int64_t bytes_read = 0;
};
OneCopyCounts one_copy_counts();

struct ShmSettings {
  uint64_t ring_bytes = 2u << 20;        // per ordered pair of ranks
  uint64_t arena_bytes = 4u << 20;       // per rank: the native collectives' slot, two halves
  uint64_t single_copy_from = 4u << 20;  // messages this large or larger go in one copy; 0: never
  std::chrono::microseconds spin{50};    // how long a waiter polls before it sleeps
  // Collectives from single_copy_from bytes on go in one copy (shm_direct.cpp) in groups of
  // at most this many ranks, through the arena in larger ones: measured faster on 2 ranks,
  // no faster than the arena on 4 (docs/benchmarks-wire.md).
  int direct_ranks = 2;
  // DISTLAB_SHM_RING_KB, DISTLAB_SHM_ARENA_KB, DISTLAB_SHM_SINGLE_COPY (0: never; 1: from 64 KiB
  // on), DISTLAB_SHM_SPIN_US, DISTLAB_SHM_DIRECT_RANKS over the defaults.
  static ShmSettings from_env();
};

// Where a fault test puts its fault (tests/comm/shm_faults_test.cpp): once
// set, the transport calls it in the rank's own thread at two points, so
// that the test kills or stops the rank exactly there:
//   "created"  this rank's segment of a communicator is in /dev/shm and
//              named in the store, not yet unlinked (its peers may still
//              be mapping it);
//   "barrier"  a barrier of a communicator's native collectives passed.
// Set it while no call of the transport runs (before the job, or between
// two calls). Unset, it costs a test of an empty function.
void set_shm_fault_point(std::function<void(const std::string& point)> at);

// This rank's side of the job on its host: its Bell, the other local ranks'
// Bells and pids, which of them it can read in one copy, the lock every
// transfer of the process moves under and the background thread.
class ShmProcess {
 public:
  // Every rank of `local_world` (world ranks on this host, this one among
  // them) calls it with the same `token`; returns once all have mapped each
  // other's pages, which are then unlinked.
  ShmProcess(c10d::Store& store, const std::string& token, int world_rank, const std::vector<int>& local_world,
             ShmSettings settings, Milliseconds timeout);
  ~ShmProcess();
  ShmProcess(const ShmProcess&) = delete;
  ShmProcess& operator=(const ShmProcess&) = delete;

  const std::string& token() const { return token_; }
  const ShmSettings& settings() const { return settings_; }
  int world_rank() const { return world_rank_; }
  // Whether `world_rank`'s process (on this host) can read this one's
  // memory in one copy, as it found when it probed.
  bool reads_me_directly(int world_rank) const;
  // Whether `reader`'s process can read `target`'s (world ranks on this host).
  bool reads_directly(int reader, int target) const;
  // "one copy (process_vm_readv) from 64 KiB, two copies below" or why not.
  std::string copy_mode() const;

  struct Peer;  // a local rank's page: its Bell, pid, probe results
  pid_t pid_of(int world_rank) const;
  // Whether that rank's process is still there (kill(pid, 0) finds it).
  bool alive(int world_rank) const;
  // "rank Q (process P on this host) has exited": one wording for every
  // error that names a rank whose process is gone.
  std::string exited_text(int world_rank) const;
  // The set-up's wait for `key`, which local rank `world_rank` (its page
  // mapped here) sets once it could `doing`: at most `timeout`, and no
  // longer once its process has exited (PeerClosed naming it, at once).
  std::string wait_for_peer(c10d::Store& store, const std::string& key, int world_rank, Milliseconds timeout,
                            const std::string& doing) const;

  // For the links: everything below runs under lock().
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mutex_); }
  // Moves every pending message of every communicator of this process;
  // true if anything moved.
  bool progress_locked();
  // Until done() holds (checked under the lock after each round of
  // progress) or `timeout` passes (false). Throws PeerClosed naming the
  // first of `watched` (world ranks) whose process is gone.
  bool wait_locked(std::unique_lock<std::mutex>& lock, const std::function<bool()>& done, Milliseconds timeout,
                   const std::vector<int>& watched, const std::string& what);
  void ring(int world_rank);
  void ring_self();
  // Returns once every message this process has sent is out of its hands
  // (in a ring, or read by its receiver), at most the timeout: what a
  // one-copy send holds is the sender's tensor until it is read.
  void settle();

  class Links;
  void add(Links* links);
  void remove(Links* links);

 private:
  void background();

  std::string token_;
  int world_rank_;
  ShmSettings settings_;
  Milliseconds timeout_;
  SharedSegment page_;
  std::vector<SharedSegment> peer_pages_;
  std::map<int, std::unique_ptr<Peer>> peers_;  // by world rank, this rank's own too
  std::mutex mutex_;
  std::vector<Links*> links_;
  bool stopping_ = false;
  std::condition_variable wake_background_;
  std::thread background_;
};

// One communicator's channels to its members on this host, its native
// collectives in the arena, and its point-to-point messages.
class ShmProcess::Links {
 public:
  // `world_ranks[i]`: member i's world rank; `here[i]`: whether member i is
  // on this host. Every local member calls it (a collective over them);
  // `key` is the same on all of them and unique to the communicator.
  Links(std::shared_ptr<ShmProcess> process, c10d::Store& store, const std::string& key, int rank,
        std::vector<int> world_ranks, std::vector<bool> here, Milliseconds timeout);
  ~Links();
  Links(const Links&) = delete;
  Links& operator=(const Links&) = delete;

  // Where the rings' counter samples go when tracing is on (null: nowhere):
  // "shm ring S->D (KEY TOKEN)" with series head, tail and capacity (bytes;
  // S and D world ranks; KEY the communicator's, "world" or a group's;
  // TOKEN the first 4 digits of the job's), on S after each chunk or header
  // it writes, on D after each it reads.
  void set_recorder(std::shared_ptr<trace::Recorder> recorder) { recorder_ = std::move(recorder); }

  bool reaches(int peer) const { return here_[peer]; }
  bool all_here() const;

  // Tags >= 0 are the program's; the links use negative ones of their own.
  WorkPtr isend(const at::Tensor& tensor, int peer, int tag, std::string what);
  WorkPtr irecv(at::Tensor& tensor, int peer, int tag, std::string what);

  // Over every member; only when all_here(). `what` names the call in errors.
  void barrier(const std::string& what);
  void broadcast(at::Tensor& tensor, int root, const std::string& what);
  void reduce(at::Tensor& tensor, int root, ReduceOp op, const std::string& what);
  void all_reduce(at::Tensor& tensor, ReduceOp op, const std::string& what);
  void all_to_all(const at::Tensor& input, at::Tensor& output, const std::vector<int64_t>& send_counts,
                  const std::vector<int64_t>& recv_counts, const std::string& what);
  // Communicator::native_all_reduce_parts with no buffer (shm_direct.cpp):
  // possible from single_copy_from bytes on, where every member reads every
  // other one in one copy (whatever the group's size).
  bool all_reduces_parts_in_place(uint64_t bytes) const;
  void all_reduce_parts(const std::vector<at::Tensor>& parts, double scale, const std::string& what);

  struct Op;
  struct Out;
  struct In;
  bool progress_locked();
  bool pending_locked() const;
  bool sending_locked() const;                                  // sends not yet out of this rank's hands
  void sending_to_locked(std::vector<int>& world_ranks) const;  // their peers
  // Waits for `op` (a Work's wait).
  void wait(const std::shared_ptr<Op>& op, Milliseconds limit);
  bool done(const std::shared_ptr<Op>& op);

 private:
  friend class ShmProcess;
  // Reduces (root < 0: all-reduces) through the arena.
  void reduce_in_arena(at::Tensor& tensor, int root, ReduceOp op, const std::string& what);
  // The same in one copy (shm_direct.cpp): every rank reads the others'
  // tensors straight out of their processes, no arena; three barriers in all.
  void reduce_directly(at::Tensor& tensor, int root, ReduceOp op, const std::string& what);
  void broadcast_directly(at::Tensor& tensor, int root, const std::string& what);
  // read(m, offset, into, bytes): member m's `bytes` at byte `offset` of
  // what it published (one tensor, or the parts of a table) into `into`.
  using ReadShare = std::function<void(int, uint64_t, uint8_t*, uint64_t)>;
  // `mine` (flat: the published whole's elements from `whole` on) reduced
  // over every member's same elements, in rank order, in place, a piece at
  // a time; every value times `scale` first (1: as it is).
  void reduce_range(at::Tensor mine, int64_t whole, ReduceOp op, double scale, const ReadShare& read);
  // Whether `tensor` goes in one copy: every member can read every other
  // one (their probes), and it is at least single_copy_from bytes.
  bool goes_directly(const at::Tensor& tensor) const;
  // Publishes where this rank's tensor is (or its table of `segments`
  // Segments, shm_internal.hpp), then waits for every member to; every
  // member's `bytes` must be the same.
  void publish(const void* address, uint64_t bytes, uint64_t segments, const std::string& what);
  void publish(const at::Tensor& tensor, const std::string& what) {
    publish(tensor.data_ptr(), static_cast<uint64_t>(tensor.nbytes()), 0, what);
  }
  // Reads `bytes` at `address` in member m's process into `into`.
  void read_at(int m, uint64_t address, void* into, uint64_t bytes, const std::string& what);
  // Reads `bytes` at `offset` of member m's published tensor into `into`.
  void read_from(int m, uint64_t offset, void* into, uint64_t bytes, const std::string& what);
  // Where member m left this collective because another member's process
  // was gone: throws PeerClosed naming that member, as if this rank had
  // found it gone itself (and leaves for it too). Returns if m has not left.
  void name_why_left(int m, const std::string& what);
  // Says in this rank's page that it leaves the collective because world
  // rank `world_rank`'s process is gone (GroupPage::left_for).
  void leave_for(int world_rank);
  uint8_t* slot(int member, int half) const;
  // A counter sample of `ring` (S->D) on `rank`, when tracing is on.
  void sample(const shm::Ring& ring, int rank, int from, int to) const;
  // Makes the Op of a send or recv, hands it to `enqueue_locked` under the
  // lock, and moves what it can at once.
  WorkPtr post(const at::Tensor& tensor, int peer, int tag, std::string what,
               const std::function<void(const std::shared_ptr<Op>&)>& enqueue_locked);
  void post_recv_locked(const std::shared_ptr<Op>& op);

  std::shared_ptr<ShmProcess> process_;
  int rank_;
  std::vector<int> world_ranks_;
  std::vector<bool> here_;
  Milliseconds timeout_;
  SharedSegment mine_;
  std::vector<SharedSegment> theirs_;  // by member; empty where not on this host
  std::vector<std::unique_ptr<Out>> out_;
  std::vector<std::unique_ptr<In>> in_;
  std::vector<int> watched_;  // world ranks of the other local members
  uint64_t generation_ = 0;   // barriers so far
  uint64_t chunks_ = 0;       // arena chunks so far (the half in use alternates)
  bool readable_ = false;     // every member reads every other one in one copy
  bool direct_ = false;       // readable_, and collectives go in one copy (direct_ranks)
  // The table all_reduce_parts publishes: kept here, not on its stack, so
  // that it stays as it was for a member still reading it after this rank
  // has left the collective on an error.
  std::vector<shm::Segment> table_;
  std::shared_ptr<trace::Recorder> recorder_;
  std::string label_;  // " (KEY TOKEN)" after a ring's counter name
};

}  // namespace distlab::comm
