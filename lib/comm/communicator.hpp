// Who talks to whom: the Communicator of one rank.
//
// Everything DistLab moves between ranks goes through these calls: the
// collectives of lib/collectives are written over isend/irecv alone, and the
// backend's own ("native") broadcast, reduce and all-reduce are the reference
// they are tested against and the fast path DDP can choose.
//
// Rules, the same for every backend:
// - Tensors are contiguous; a recv's tensor is allocated by the caller with
//   the dtype and element count of the matching send. A message that does
//   not fit is refused by the recv's wait, naming both (CommError).
// - Messages from one rank to another with one tag arrive in the order sent.
// - A non-blocking call returns a Work; the tensor must stay untouched until
//   wait() returns. wait() throws TimeoutError after timeout() naming the
//   operation and the peer it waited for: nothing waits forever.
// - Native collectives are called by every rank, in the same order.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "comm/errors.hpp"
#include "comm/reduce_op.hpp"
#include "trace/recorder.hpp"

namespace distlab::flight {
class Recorder;
class Ring;
}  // namespace distlab::flight

namespace distlab::comm {

using Milliseconds = std::chrono::milliseconds;
inline constexpr Milliseconds kDefaultTimeout{std::chrono::minutes(3)};

// A pending send or recv.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until done. Throws TimeoutError or CommError.
  virtual void wait() = 0;
  // The same, bounded by `limit` instead of the communicator's timeout:
  // for the one wait that a person, not a peer, makes long
  // (comm/wait_for_rank.hpp). is_completed() cannot stand in for it: a gloo
  // recv reports completion only once waited for.
  virtual void wait_up_to(Milliseconds limit) = 0;
  // True once done (never throws; wait() reports errors).
  virtual bool is_completed() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

inline constexpr Milliseconds kDefaultConnectTimeout{std::chrono::seconds(60)};

struct CommOptions {
  // Longest wait for another rank in any operation.
  Milliseconds timeout = kDefaultTimeout;
  // Longest wait for all ranks to join at start-up (processes start at
  // different times, so this is not the per-operation timeout).
  Milliseconds connect_timeout = kDefaultConnectTimeout;
  // Shared by every rank of a process; null or without sinks = no tracing.
  std::shared_ptr<trace::Recorder> recorder;
  // Where this rank keeps its tensors: CPU, or cuda:N (nccl, or threads
  // ranks sharing GPUs). Lessons allocate on comm.device().
  at::Device device = at::kCPU;
  // Set by split() for a group: the job-wide rank of each member (index =
  // rank in the group) and the group's name. Empty / "world" for the job.
  std::vector<int> world_ranks;
  std::string group = "world";
  // The flight recorder (flight/recorder.hpp), shared like `recorder`; null =
  // a new one from DISTLAB_FLIGHT_ENTRIES / DISTLAB_FLIGHT_DIR. On by default.
  std::shared_ptr<flight::Recorder> flight;
};

class Communicator {
 public:
  Communicator(int rank, int size, CommOptions options);
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // This rank and the number of ranks in this communicator (a group made by
  // split() numbers its members 0..k-1).
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Where this communicator sits in the whole job: trace events and error
  // messages name ranks by their job-wide number.
  int world_rank() const { return world_rank_of(rank_); }
  int world_rank_of(int rank) const;
  const std::string& group() const { return options_.group; }
  bool is_world() const { return options_.world_ranks.empty(); }
  virtual std::string backend() const = 0;
  // Whether this rank's backward runs on an autograd engine thread that
  // other ranks' backwards run on too (thread ranks sharing a GPU), where
  // no rank may wait for another (comm/backward_thread.hpp).
  virtual bool shares_engine_thread() const { return false; }
  Milliseconds timeout() const { return options_.timeout; }
  Milliseconds connect_timeout() const { return options_.connect_timeout; }
  at::Device device() const { return options_.device; }
  trace::Recorder* recorder() const { return options_.recorder.get(); }
  const std::shared_ptr<trace::Recorder>& recorder_ptr() const { return options_.recorder; }
  // This rank's ring of its last operations (comm/flight_op.hpp records into
  // it), shared with the groups this rank belongs to, and the recorder that
  // writes it out.
  flight::Ring* flight_ring() const { return flight_ring_.get(); }
  const std::shared_ptr<flight::Ring>& flight_ring_ptr() const { return flight_ring_; }
  flight::Recorder* flight_recorder() const { return options_.flight.get(); }
  // The sequence number of this group's next collective: every member counts
  // the same collectives, so #42 is the same call on all of them.
  uint64_t next_collective_seq() { return collective_seq_++; }

  // Point to point. tag >= 0.
  WorkPtr isend(const at::Tensor& tensor, int peer, int tag = 0);
  WorkPtr irecv(at::Tensor& tensor, int peer, int tag = 0);
  void send(const at::Tensor& tensor, int peer, int tag = 0) { isend(tensor, peer, tag)->wait(); }
  void recv(at::Tensor& tensor, int peer, int tag = 0) { irecv(tensor, peer, tag)->wait(); }

  // Point to point inside a collective whose ranks all run one plan
  // (collectives/executor.cpp): once the call itself is known to agree,
  // every message's size agrees by construction, and a backend may leave
  // out its check of each message. Gloo does: no header and no copy into
  // fresh memory, which cost the ring a third to three quarters of its
  // bandwidth (docs/benchmarks.md). The other backends check each message
  // anyway, at no cost worth saving, and these are isend/irecv there.
  WorkPtr isend_agreed(const at::Tensor& tensor, int peer, int tag);
  WorkPtr irecv_agreed(at::Tensor& tensor, int peer, int tag);
  // Whether isend_agreed/irecv_agreed leave the check out: then their
  // caller checks each call once, with post_call_check().
  bool agreed_messages_unchecked() const { return size_ > 1 && do_agreed_unchecked(); }
  // That check's messages, all posted at once: `call` (a small tensor that
  // describes the call, of one size on every rank) to every rank of `to`,
  // and a recv of one like it from every rank of `from` into theirs[i].
  // Agreed messages (one size by construction), not traced: they are the
  // collective's bookkeeping, as the headers they replace were. Returns the
  // recvs' works in `from`'s order, then the sends'.
  std::vector<WorkPtr> post_call_check(const at::Tensor& call, const std::vector<int>& to,
                                       const std::vector<int>& from, std::vector<at::Tensor>& theirs, int tag);

  // Returns once every rank has called it.
  void barrier();
  // Returns once the messages this rank has sent, on this communicator and
  // on every group of this process, hold no memory here: a gloo send
  // completes when its receiver has posted the recv, and the copy of its
  // data is freed in the background (comm/gloo_p2p.hpp); settle() waits for
  // that. For measuring memory; nothing else needs it.
  void settle() { do_settle(); }

  // A communicator over a subset of this one's ranks, in the spirit of
  // MPI_Comm_split: every rank calls it (a collective); ranks passing the
  // same `color` form one group, numbered 0..k-1 in order of (key, rank).
  // A negative color joins no group and gets nullptr. The group's traffic
  // never crosses this communicator's or another group's, even when both are
  // busy at once. `name` labels the group in traces and errors (default
  // "<parent>/<color>").
  //
  //   auto stage = world.split(/*color=*/rank / 2, /*key=*/rank, "stage");
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name = "");
  // torch.distributed.new_group(ranks) on top of split(): the listed ranks
  // (of this communicator), in that order; others get nullptr.
  std::unique_ptr<Communicator> new_group(const std::vector<int>& ranks, const std::string& name = "");

  // "rank 3" in the world, "rank 3 (stage1 rank 1)" in a group: how errors
  // name this rank.
  std::string self() const;
  // Adds the group's name to a trace span of this communicator.
  void label(trace::Span& span) const;

  // The backend's own collectives, in place.
  void native_broadcast(at::Tensor& tensor, int root);
  void native_reduce(at::Tensor& tensor, int root, ReduceOp op = ReduceOp::kSum);
  void native_all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum);
  // Out of place, 1-D and contiguous: input holds send_counts[d] elements for
  // rank d, in rank order; output gets recv_counts[s] from rank s. Gloo and
  // threads have one; nccl refuses (collectives::all_to_all's pairwise plan
  // runs anywhere).
  void native_all_to_all(const at::Tensor& input, at::Tensor& output, const std::vector<int64_t>& send_counts,
                         const std::vector<int64_t>& recv_counts);

  // DDP's all-reduce of one bucket's gradients where they lie
  // (ddp/reducer.cpp): every part becomes the sum over ranks of
  // (that part x scale), the parts taken as one tensor in their order and
  // summed in rank order, bit for bit what multiplying them into one buffer
  // (at::mul_out) and native_all_reduce of it give. The parts: contiguous,
  // one dtype and device, the same element counts on every rank.
  // A backend that does it with no such buffer, reading the other ranks'
  // parts where they are, says so for a bucket of `bytes` (the same answer
  // on every rank): the shared-memory transport when its ranks read each
  // other's memory in one copy. The others run exactly that: a buffer, the
  // all-reduce, the copies back.
  bool all_reduces_parts_in_place(int64_t bytes) const { return size_ > 1 && can_all_reduce_parts_in_place(bytes); }
  void native_all_reduce_parts(const std::vector<at::Tensor>& parts, double scale);

 protected:
  virtual WorkPtr do_isend(const at::Tensor& tensor, int peer, int tag) = 0;
  virtual WorkPtr do_irecv(at::Tensor& tensor, int peer, int tag) = 0;
  virtual WorkPtr do_isend_agreed(const at::Tensor& tensor, int peer, int tag) { return do_isend(tensor, peer, tag); }
  virtual WorkPtr do_irecv_agreed(at::Tensor& tensor, int peer, int tag) { return do_irecv(tensor, peer, tag); }
  virtual bool do_agreed_unchecked() const { return false; }
  virtual void do_barrier() = 0;
  virtual void do_settle() {}
  virtual void do_broadcast(at::Tensor& tensor, int root) = 0;
  virtual void do_reduce(at::Tensor& tensor, int root, ReduceOp op) = 0;
  virtual void do_all_reduce(at::Tensor& tensor, ReduceOp op) = 0;
  virtual void do_all_to_all(const at::Tensor& input, at::Tensor& output, const std::vector<int64_t>& send_counts,
                             const std::vector<int64_t>& recv_counts);
  virtual bool can_all_reduce_parts_in_place(int64_t /*bytes*/) const { return false; }
  virtual void do_all_reduce_parts(const std::vector<at::Tensor>& parts, double scale);
  // Builds this rank's communicator of a group. `members` are the ranks of
  // this communicator in the group's order (this rank among them); `key` is
  // unique to this split call and group, the same on every member; `options`
  // already carry the group's world ranks and name.
  virtual std::unique_ptr<Communicator> do_split(const std::vector<int>& members, const std::string& key,
                                                 CommOptions options) = 0;
  const CommOptions& options() const { return options_; }

  // "rank 2: recv from rank 0 (tag 5)": the start of every message.
  std::string describe(const char* op, int peer, int tag) const;

 private:
  void check_peer(const char* op, int peer, int tag) const;
  void check_tensor(const char* op, const at::Tensor& tensor) const;
  void check_root(const char* op, int root) const;
  WorkPtr post_send(const at::Tensor& tensor, int peer, int tag, bool agreed);
  WorkPtr post_recv(at::Tensor& tensor, int peer, int tag, bool agreed);
  // Wraps `work` so that its completion is recorded as one trace event.
  WorkPtr traced(const char* op, const at::Tensor& tensor, int peer, int tag, uint64_t flow, int64_t begin_us,
                 WorkPtr work);
  // The n-th message to/from (peer, tag), for flow ids in the trace.
  uint64_t next_seq(std::map<std::pair<int, int>, uint64_t>& counters, int peer, int tag);

  int rank_;
  int size_;
  CommOptions options_;
  std::mutex seq_mutex_;
  std::map<std::pair<int, int>, uint64_t> send_seq_;
  std::map<std::pair<int, int>, uint64_t> recv_seq_;
  std::shared_ptr<flight::Ring> flight_ring_;
  std::atomic<uint64_t> collective_seq_{0};
  int splits_ = 0;          // split() calls so far: every rank counts alike
  uint64_t flow_salt_ = 0;  // keeps flow ids of different groups apart
};

// Raises TimeoutError for `what` (from Communicator::describe) after `timeout`.
[[noreturn]] void throw_timeout(const std::string& what, Milliseconds timeout, const std::string& hint);

}  // namespace distlab::comm
