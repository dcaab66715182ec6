#include "comm/same_host_backend.hpp"

#include <unistd.h>

#include <cstdio>
#include <random>

#include "comm/gloo_communicator.hpp"
#include "comm/host_identity.hpp"
#include "comm/shm_links.hpp"
#include "comm/store.hpp"

namespace distlab::comm {
namespace {

// Every rank's host identity, by world rank, through the store.
std::vector<std::string> exchange_hosts(c10d::Store& store, int rank, int size, Milliseconds timeout) {
  set_text(store, "distlab/shm/host/" + std::to_string(rank), host_identity());
  std::vector<std::string> hosts(size);
  for (int r = 0; r < size; ++r)
    hosts[r] = wait_text(
        store, "distlab/shm/host/" + std::to_string(r), timeout,
        "rank " + std::to_string(rank) + ": rank " + std::to_string(r) + " did not say which host it runs on");
  return hosts;
}

// The job's token for segment names, drawn by rank 0.
std::string job_token(c10d::Store& store, int rank, Milliseconds timeout) {
  if (rank == 0) {
    std::random_device random;
    char text[17];
    std::snprintf(text, sizeof text, "%08x%08x", random(), random() ^ static_cast<unsigned>(getpid()));
    set_text(store, "distlab/shm/token", text);
  }
  return wait_text(store, "distlab/shm/token", timeout, "rank " + std::to_string(rank) + ": rank 0 drew no job token");
}

class SameHostCommunicator : public GlooCommunicator {
 public:
  SameHostCommunicator(const WorldInfo& world, CommOptions options) : GlooCommunicator(world, std::move(options)) {
    hosts_ = exchange_hosts(*store(), rank(), size(), connect_timeout());
    const std::string token = job_token(*store(), rank(), connect_timeout());
    std::vector<int> local;
    for (int r = 0; r < size(); ++r)
      if (hosts_[r] == hosts_[rank()]) local.push_back(r);
    if (local.size() > 1)
      process_ =
          std::make_shared<ShmProcess>(*store(), token, rank(), local, ShmSettings::from_env(), connect_timeout());
    link("world");
    if (local.front() == rank() && std::getenv("DISTLAB_QUIET") == nullptr)
      std::fprintf(stderr,
                   "distlab: %zu rank(s) on this host talk through shared memory (%s), %d elsewhere through TCP\n",
                   local.size(), process_ ? process_->copy_mode().c_str() : "none needed",
                   size() - static_cast<int>(local.size()));
  }

  SameHostCommunicator(const SameHostCommunicator& parent, int rank, int size, CommOptions options,
                       const std::string& key)
      : GlooCommunicator(rank, size, std::move(options), parent.store(), parent.gloo_options(), key),
        process_(parent.process_),
        hosts_(parent.hosts_) {
    link(key);
  }

  std::string backend() const override { return "shm"; }

 protected:
  WorkPtr do_isend(const at::Tensor& tensor, int peer, int tag) override {
    if (!here(peer)) return GlooCommunicator::do_isend(tensor, peer, tag);
    require_cpu("send", tensor);
    return links_->isend(tensor, peer, tag, describe("send", peer, tag));
  }

  WorkPtr do_irecv(at::Tensor& tensor, int peer, int tag) override {
    if (!here(peer)) return GlooCommunicator::do_irecv(tensor, peer, tag);
    require_cpu("recv", tensor);
    return links_->irecv(tensor, peer, tag, describe("recv", peer, tag));
  }

  WorkPtr do_isend_agreed(const at::Tensor& tensor, int peer, int tag) override {
    if (!here(peer)) return GlooCommunicator::do_isend_agreed(tensor, peer, tag);
    return do_isend(tensor, peer, tag);
  }

  WorkPtr do_irecv_agreed(at::Tensor& tensor, int peer, int tag) override {
    if (!here(peer)) return GlooCommunicator::do_irecv_agreed(tensor, peer, tag);
    return do_irecv(tensor, peer, tag);
  }

  // The shared-memory links check every message at no cost: a call needs a
  // check of its own only where some of its messages go through gloo.
  bool do_agreed_unchecked() const override { return !all_here(); }

  void do_settle() override {
    GlooCommunicator::do_settle();
    if (process_) process_->settle();
  }

  void do_barrier() override {
    if (!all_here()) return GlooCommunicator::do_barrier();
    links_->barrier(self() + ": barrier");
  }

  void do_broadcast(at::Tensor& tensor, int root) override {
    if (!all_here()) return GlooCommunicator::do_broadcast(tensor, root);
    require_cpu("broadcast", tensor);
    links_->broadcast(tensor, root, self() + ": broadcast");
  }

  void do_reduce(at::Tensor& tensor, int root, ReduceOp op) override {
    if (!all_here()) return GlooCommunicator::do_reduce(tensor, root, op);
    require_cpu("reduce", tensor);
    links_->reduce(tensor, root, op, self() + ": reduce");
  }

  void do_all_reduce(at::Tensor& tensor, ReduceOp op) override {
    if (!all_here()) return GlooCommunicator::do_all_reduce(tensor, op);
    require_cpu("all_reduce", tensor);
    links_->all_reduce(tensor, op, self() + ": all_reduce");
  }

  bool can_all_reduce_parts_in_place(int64_t bytes) const override {
    return all_here() && links_->all_reduces_parts_in_place(static_cast<uint64_t>(bytes));
  }

  void do_all_reduce_parts(const std::vector<at::Tensor>& parts, double scale) override {
    int64_t bytes = 0;
    for (const at::Tensor& part : parts) bytes += static_cast<int64_t>(part.nbytes());
    if (!can_all_reduce_parts_in_place(bytes)) return GlooCommunicator::do_all_reduce_parts(parts, scale);
    require_cpu("all_reduce", parts.front());
    links_->all_reduce_parts(parts, scale, self() + ": all_reduce");
  }

  void do_all_to_all(const at::Tensor& input, at::Tensor& output, const std::vector<int64_t>& send_counts,
                     const std::vector<int64_t>& recv_counts) override {
    if (!all_here()) return GlooCommunicator::do_all_to_all(input, output, send_counts, recv_counts);
    require_cpu("all_to_all", input);
    links_->all_to_all(input, output, send_counts, recv_counts, self() + ": all_to_all");
  }

  std::unique_ptr<Communicator> do_split(const std::vector<int>& members, const std::string& key,
                                         CommOptions options) override {
    const int mine = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    return std::make_unique<SameHostCommunicator>(*this, mine, static_cast<int>(members.size()), std::move(options),
                                                  key);
  }

 private:
  bool here(int peer) const { return links_ && links_->reaches(peer); }
  bool all_here() const { return links_ && links_->all_here(); }

  // This communicator's rings to its members on this host, if it has any.
  void link(const std::string& key) {
    if (!process_) return;
    std::vector<int> world_ranks(size());
    std::vector<bool> here(size());
    int count = 0;
    for (int r = 0; r < size(); ++r) {
      world_ranks[r] = world_rank_of(r);
      here[r] = hosts_[world_ranks[r]] == hosts_[world_rank()];
      count += here[r] ? 1 : 0;
    }
    if (count > 1) {
      links_ = std::make_unique<ShmProcess::Links>(process_, *store(), key, rank(), world_ranks, here, timeout());
      links_->set_recorder(recorder_ptr());
    }
  }

  std::shared_ptr<ShmProcess> process_;
  std::vector<std::string> hosts_;  // by world rank
  std::unique_ptr<ShmProcess::Links> links_;
};

}  // namespace

std::unique_ptr<Communicator> make_same_host_communicator(const WorldInfo& world, CommOptions options) {
  return std::make_unique<SameHostCommunicator>(world, std::move(options));
}

}  // namespace distlab::comm
