#include "comm/threads_backend.hpp"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "comm/backward_thread.hpp"
#include "comm/flight_op.hpp"
#include "flight/recorder.hpp"

namespace distlab::comm {

// ------------------------------------------------------------------ state

struct OpStatus {
  bool matched = false;  // paired with its partner (the copy may still run)
  bool done = false;     // the copy finished (or failed: error is set)
  std::string error;
  // Its waiter sleeps here, woken when this op completes or the job aborts:
  // not on the world's one condition, where every completion would wake
  // every rank (16 thread ranks' collectives sweep: 89,094 context switches
  // then, 27,560 now; its time is mostly page faults either way).
  std::condition_variable cv;
};

// A send or recv posted before its partner.
struct PendingOp {
  at::Tensor tensor;
  std::shared_ptr<OpStatus> status;
};

// Messages from src to dst with one tag: posted sends and recvs waiting for
// a partner. At most one of the two queues is non-empty at any time.
struct Channel {
  std::deque<PendingOp> sends;
  std::deque<PendingOp> recvs;
};

class ThreadWorld {
 public:
  ThreadWorld(int size, CommOptions options, bool shares_gpu)
      : size_(size), options_(std::move(options)), shares_gpu_(shares_gpu), slots_(size), partials_(size),
        present_(size), what_(size) {}

  int size() const { return size_; }
  const CommOptions& options() const { return options_; }
  // Two ranks of the job on one GPU: their backwards share the autograd
  // engine's thread of that GPU, where no rank may wait for another
  // (comm/backward_thread.hpp).
  bool shares_gpu() const { return shares_gpu_; }

  std::mutex mutex;
  std::condition_variable cv;            // a rendezvous opened, or abort
  std::multiset<OpStatus*> waiting_ops;  // ops waited for now: an abort wakes them
  std::map<std::tuple<int, int, int>, Channel> channels;  // (src, dst, tag)
  bool aborted = false;
  std::string abort_reason;
  // Groups made by split(), by the split's unique key: each has mailboxes of
  // its own, so its traffic never meets the parent's or a sibling's.
  std::map<std::string, std::shared_ptr<ThreadWorld>> groups;

  // A failure anywhere in the job reaches every group, so that nobody waits
  // inside a group for a rank that is gone. Lock order: parent, then child.
  void abort_locked(const std::string& reason) {
    if (!aborted) {
      aborted = true;
      abort_reason = reason;
    }
    cv.notify_all();
    for (OpStatus* op : waiting_ops) op->cv.notify_all();
    for (auto& [key, group] : groups) {
      std::lock_guard<std::mutex> lock(group->mutex);
      group->abort_locked(reason);
    }
  }

  // Every rank calls it with the same `what`; returns when all have.
  // A defined `publish` is stored in slots_[rank] for the others to read;
  // an undefined one leaves the slot as it is (others may still read it).
  void rendezvous(int rank, const std::string& what, const at::Tensor& publish = at::Tensor());
  std::vector<at::Tensor>& slots() { return slots_; }
  std::vector<at::Tensor>& partials() { return partials_; }

 private:
  int size_;
  CommOptions options_;
  bool shares_gpu_;
  std::vector<at::Tensor> slots_;
  std::vector<at::Tensor> partials_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  std::vector<bool> present_;
  std::vector<std::string> what_;
};

void ThreadWorld::rendezvous(int rank, const std::string& what, const at::Tensor& publish) {
  if (shares_gpu_ && size_ > 1)
    refuse_wait_on_engine_thread("rank " + std::to_string(rank) + ": " + what, "the other ranks");
  std::unique_lock<std::mutex> lock(mutex);
  if (aborted) throw JobAborted("rank " + std::to_string(rank) + ": " + what + ": job aborted: " + abort_reason);
  const uint64_t generation = generation_;
  if (publish.defined()) slots_[rank] = publish;
  what_[rank] = what;
  present_[rank] = true;
  if (++arrived_ == size_) {
    // The last to arrive checks that everybody called the same collective.
    for (int r = 1; r < size_; ++r) {
      if (what_[r] != what_[0]) {
        std::string reason = "ranks disagree on the collective: rank 0 called " + what_[0] + " but rank " +
                             std::to_string(r) + " called " + what_[r];
        abort_locked(reason);
        throw CommError("rank " + std::to_string(rank) + ": " + reason);
      }
    }
    arrived_ = 0;
    std::fill(present_.begin(), present_.end(), false);
    ++generation_;
    cv.notify_all();
    return;
  }
  const bool opened = cv.wait_for(lock, options_.timeout, [&] { return generation_ != generation || aborted; });
  if (generation_ != generation) return;
  if (!opened) {
    std::ostringstream missing;
    for (int r = 0; r < size_; ++r)
      if (!present_[r]) missing << (missing.tellp() > 0 ? ", " : "") << r;
    std::string reason = "rank " + std::to_string(rank) + ": " + what + " did not complete within " +
                         std::to_string(options_.timeout.count()) + " ms: waiting for rank(s) " + missing.str() +
                         ", which never joined it";
    abort_locked(reason);
    throw TimeoutError(reason);
  }
  throw JobAborted("rank " + std::to_string(rank) + ": " + what + ": job aborted: " + abort_reason);
}

// ------------------------------------------------------------------- work

namespace {

class ThreadsWork : public Work {
 public:
  ThreadsWork(ThreadWorld& world, std::shared_ptr<OpStatus> status, std::tuple<int, int, int> key, bool is_send,
              std::string what, std::string hint)
      : world_(world), status_(std::move(status)), key_(key), is_send_(is_send), what_(std::move(what)),
        hint_(std::move(hint)) {}

  void wait() override { wait_up_to(world_.options().timeout); }

  void wait_up_to(Milliseconds limit) override {
    if (world_.shares_gpu())
      refuse_wait_on_engine_thread(what_, "rank " + std::to_string(is_send_ ? std::get<1>(key_) : std::get<0>(key_)));
    std::unique_lock<std::mutex> lock(world_.mutex);
    const auto waiting = world_.waiting_ops.insert(status_.get());
    status_->cv.wait_for(lock, limit, [&] { return status_->done || world_.aborted; });
    if (!status_->done && status_->matched) {
      // The partner arrived and its copy is running: that ends soon.
      status_->cv.wait(lock, [&] { return status_->done; });
    }
    world_.waiting_ops.erase(waiting);
    if (status_->done) {
      if (!status_->error.empty()) throw CommError(what_ + ": " + status_->error);
      return;
    }
    withdraw();
    if (world_.aborted) throw JobAborted(what_ + ": job aborted: " + world_.abort_reason);
    throw_timeout(what_, limit, hint_);
  }

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(world_.mutex);
    return status_->done;
  }

 private:
  // Takes the unmatched op out of its channel so that no late partner
  // matches a request nobody waits for any more.
  void withdraw() {
    auto it = world_.channels.find(key_);
    if (it == world_.channels.end()) return;
    auto& queue = is_send_ ? it->second.sends : it->second.recvs;
    for (auto op = queue.begin(); op != queue.end(); ++op)
      if (op->status == status_) {
        queue.erase(op);
        return;
      }
  }

  ThreadWorld& world_;
  std::shared_ptr<OpStatus> status_;
  std::tuple<int, int, int> key_;
  bool is_send_;
  std::string what_;
  std::string hint_;
};

std::string shape_of(const at::Tensor& t) {
  return std::to_string(t.numel()) + " " + std::string(c10::toString(t.scalar_type())) + " elements";
}

// Copies send -> recv outside the world lock, then marks both done.
void complete(ThreadWorld& world, const PendingOp& send, const PendingOp& recv) {
  std::string error;
  if (send.tensor.scalar_type() != recv.tensor.scalar_type() || send.tensor.numel() != recv.tensor.numel()) {
    error = "the send carries " + shape_of(send.tensor) + " but the recv expects " + shape_of(recv.tensor);
  } else if (send.tensor.numel() > 0) {
    try {
      recv.tensor.view({-1}).copy_(send.tensor.view({-1}));
    } catch (const std::exception& e) {
      error = std::string("copy failed: ") + e.what();
    }
  }
  std::lock_guard<std::mutex> lock(world.mutex);
  for (auto* status : {send.status.get(), recv.status.get()}) {
    status->done = true;
    status->error = error;
    status->cv.notify_all();
  }
}

// A device without index in the shared options means "spread the ranks
// over the GPUs": rank r takes cuda:(r % count).
CommOptions rank_options(const CommOptions& shared, int rank) {
  CommOptions mine = shared;
  if (mine.device.is_cuda() && !mine.device.has_index()) {
    const int gpus = static_cast<int>(torch::cuda::device_count());
    if (gpus == 0) throw SetupError("rank " + std::to_string(rank) + ": CUDA ranks asked for, but no GPU is usable");
    mine.device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(rank % gpus));
  }
  return mine;
}

class ThreadsCommunicator : public Communicator {
 public:
  ThreadsCommunicator(std::shared_ptr<ThreadWorld> world, int rank, CommOptions options)
      : Communicator(rank, world->size(), std::move(options)), world_(std::move(world)) {}

  std::string backend() const override { return "threads"; }
  bool shares_engine_thread() const override { return world_->shares_gpu(); }

 protected:
  WorkPtr do_isend(const at::Tensor& tensor, int peer, int tag) override {
    return post(tensor, {rank(), peer, tag}, /*is_send=*/true,
                describe("send", peer, tag),
                "Rank " + std::to_string(peer) + " never posted the matching recv (tag " + std::to_string(tag) +
                    "); is it still running, and does it recv from rank " + std::to_string(rank()) + "?");
  }

  WorkPtr do_irecv(at::Tensor& tensor, int peer, int tag) override {
    return post(tensor, {peer, rank(), tag}, /*is_send=*/false, describe("recv", peer, tag),
                "Rank " + std::to_string(peer) + " never sent a matching message (tag " + std::to_string(tag) +
                    "); is it still running, and does it send to rank " + std::to_string(rank()) + "?");
  }

  void do_barrier() override { world_->rendezvous(rank(), "barrier"); }

  std::unique_ptr<Communicator> do_split(const std::vector<int>& members, const std::string& key,
                                         CommOptions options) override {
    std::shared_ptr<ThreadWorld> group;
    {
      // The first member to get here makes the group's world; the others
      // find it under the same key.
      std::lock_guard<std::mutex> lock(world_->mutex);
      if (world_->aborted) throw JobAborted(self() + ": split: job aborted: " + world_->abort_reason);
      auto& slot = world_->groups[key];
      if (!slot)
        slot = std::make_shared<ThreadWorld>(static_cast<int>(members.size()), options, world_->shares_gpu());
      group = slot;
    }
    const int mine = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    return std::make_unique<ThreadsCommunicator>(group, mine, std::move(options));
  }

  void do_broadcast(at::Tensor& tensor, int root) override {
    const std::string what = "broadcast(" + shape_of(tensor) + ", root " + std::to_string(root) + ")";
    world_->rendezvous(rank(), what, tensor);
    if (rank() != root) tensor.copy_(world_->slots()[root]);
    world_->rendezvous(rank(), what + " done");  // root keeps its tensor until all have read it
  }

  void do_reduce(at::Tensor& tensor, int root, ReduceOp op) override {
    const std::string what = std::string("reduce(") + shape_of(tensor) + ", root " + std::to_string(root) + ", " +
                             to_string(op) + ")";
    world_->rendezvous(rank(), what, tensor);
    at::Tensor result;
    if (rank() == root) {
      // Ranks in order 0, 1, ..., p-1: the same order as a naive sum.
      result = world_->slots()[0].clone();
      for (int r = 1; r < size(); ++r) combine_into(result, world_->slots()[r], op);
      finish_average(result, op, size());
    }
    world_->rendezvous(rank(), what + " done");  // nobody changes an input the root still reads
    if (rank() == root) tensor.copy_(result);
  }

  void do_all_reduce(at::Tensor& tensor, ReduceOp op) override {
    const std::string what = std::string("all_reduce(") + shape_of(tensor) + ", " + to_string(op) + ")";
    world_->rendezvous(rank(), what, tensor);
    // Each rank reduces one slice of everybody's buffer (in rank order), so
    // the work is spread over the threads; then every rank gathers all slices.
    const int64_t n = tensor.numel();
    auto slice_of = [&](int r) {
      const int64_t base = n / size(), extra = n % size();
      const int64_t begin = r * base + std::min<int64_t>(r, extra);
      return std::make_pair(begin, begin + base + (r < extra ? 1 : 0));
    };
    auto [begin, end] = slice_of(rank());
    at::Tensor mine = world_->slots()[0].view({-1}).slice(0, begin, end).clone();
    for (int r = 1; r < size(); ++r) combine_into(mine, world_->slots()[r].view({-1}).slice(0, begin, end), op);
    finish_average(mine, op, size());
    world_->partials()[rank()] = mine;
    world_->rendezvous(rank(), what + " slices");
    for (int r = 0; r < size(); ++r) {
      auto [b, e] = slice_of(r);
      if (e > b) tensor.view({-1}).slice(0, b, e).copy_(world_->partials()[r]);
    }
  }

  // Every rank publishes its input and what it sends to whom; each then
  // copies its block out of every other's input.
  void do_all_to_all(const at::Tensor& input, at::Tensor& output, const std::vector<int64_t>& send_counts,
                     const std::vector<int64_t>& recv_counts) override {
    const std::string what = "all_to_all(" + std::string(c10::toString(input.scalar_type())) + ")";
    world_->partials()[rank()] = at::tensor(send_counts, at::kLong);
    world_->rendezvous(rank(), what, input);
    int64_t at_out = 0;
    for (int s = 0; s < size(); ++s) {
      const int64_t* theirs = world_->partials()[s].data_ptr<int64_t>();
      int64_t at_in = 0;
      for (int d = 0; d < rank(); ++d) at_in += theirs[d];
      if (theirs[rank()] != recv_counts[s]) {
        world_->rendezvous(rank(), what + " done");
        throw CommError("rank " + std::to_string(rank()) + ": all_to_all: rank " + std::to_string(s) + " sends " +
                        std::to_string(theirs[rank()]) + " elements here but this rank expects " +
                        std::to_string(recv_counts[s]));
      }
      output.narrow(0, at_out, recv_counts[s]).copy_(world_->slots()[s].narrow(0, at_in, recv_counts[s]));
      at_out += recv_counts[s];
    }
    world_->rendezvous(rank(), what + " done");  // nobody changes an input another still reads
  }

 private:
  WorkPtr post(const at::Tensor& tensor, std::tuple<int, int, int> key, bool is_send, std::string what,
               std::string hint) {
    auto status = std::make_shared<OpStatus>();
    PendingOp mine{tensor, status};
    PendingOp partner;
    {
      std::lock_guard<std::mutex> lock(world_->mutex);
      if (world_->aborted) throw JobAborted(what + ": job aborted: " + world_->abort_reason);
      Channel& channel = world_->channels[key];
      auto& waiting = is_send ? channel.recvs : channel.sends;
      if (waiting.empty()) {
        (is_send ? channel.sends : channel.recvs).push_back(mine);
      } else {
        partner = waiting.front();
        waiting.pop_front();
        partner.status->matched = status->matched = true;
      }
    }
    if (partner.status) {
      if (is_send)
        complete(*world_, mine, partner);
      else
        complete(*world_, partner, mine);
    }
    return std::make_shared<ThreadsWork>(*world_, status, key, is_send, std::move(what), std::move(hint));
  }

  std::shared_ptr<ThreadWorld> world_;
};

}  // namespace

// ------------------------------------------------------------- public API

std::shared_ptr<ThreadWorld> make_thread_world(int world_size, CommOptions options) {
  if (world_size < 1) throw SetupError("threads backend: --ranks must be at least 1, got " + std::to_string(world_size));
  // One flight recorder for the job's thread ranks: a dump writes every
  // rank's file, the ones that never failed included.
  if (!options.flight) options.flight = make_flight_recorder();
  // Ranks spread over the GPUs as rank_options does: more ranks than GPUs,
  // or all on the one named, share one.
  const bool shares_gpu =
      options.device.is_cuda() && world_size > 1 &&
      (options.device.has_index() || world_size > static_cast<int>(torch::cuda::device_count()));
  return std::make_shared<ThreadWorld>(world_size, std::move(options), shares_gpu);
}

std::unique_ptr<Communicator> make_thread_communicator(const std::shared_ptr<ThreadWorld>& world, int rank) {
  return std::make_unique<ThreadsCommunicator>(world, rank, rank_options(world->options(), rank));
}

void abort_thread_world(ThreadWorld& world, const std::string& reason) {
  std::lock_guard<std::mutex> lock(world.mutex);
  world.abort_locked(reason);
}

void run_thread_ranks(int world_size, const std::function<void(Communicator&)>& body, CommOptions options) {
  auto world = make_thread_world(world_size, std::move(options));
  // The first failure that is not merely the echo of another rank's.
  std::mutex failure_mutex;
  std::string first_failure;
  bool first_was_timeout = false;
  bool first_was_echo = false;
  std::vector<std::thread> threads;
  threads.reserve(world_size);
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = make_thread_communicator(world, r);
        body(*comm);
        comm->flight_ring()->set_exit("returned");
      } catch (const std::exception& e) {
        world->options().flight->ring_of(r, world_size)->set_exit(std::string("failed: ") + e.what());
        std::string reason = "rank " + std::to_string(r) + " failed: " + e.what();
        {
          std::lock_guard<std::mutex> lock(failure_mutex);
          const bool echo = dynamic_cast<const JobAborted*>(&e) != nullptr;
          if (first_failure.empty() || (first_was_echo && !echo)) {
            first_failure = reason;
            first_was_timeout = dynamic_cast<const TimeoutError*>(&e) != nullptr;
            first_was_echo = echo;
          }
        }
        abort_thread_world(*world, reason);
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first_failure.empty()) return;
  if (first_was_timeout) throw TimeoutError(first_failure);
  throw CommError(first_failure);
}

}  // namespace distlab::comm
