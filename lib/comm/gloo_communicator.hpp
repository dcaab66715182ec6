// The gloo backend's communicator, in a header of its own so that the
// same-host backend (comm/same_host_backend.hpp) can build on it: one
// process per rank, connected through LibTorch's c10d ProcessGroupGloo (TCP).
#pragma once

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "comm/env.hpp"
#include "comm/gloo_p2p.hpp"
#include "comm/store.hpp"

namespace distlab::comm {

inline c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax: return c10d::ReduceOp::MAX;
    case ReduceOp::kMin: return c10d::ReduceOp::MIN;
    default: return c10d::ReduceOp::SUM;  // kAvg: a sum, divided afterwards
  }
}

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(const WorldInfo& world, CommOptions options)
      : Communicator(world.rank, world.world_size, std::move(options)), payloads_(timeout()) {
    store_ = connect_store(world, connect_timeout());
    // Gloo uses this timeout to build its connections; each operation's wait
    // is bounded by timeout() (GlooWork).
    gloo_options_ = c10d::ProcessGroupGloo::Options::create(std::max(timeout(), connect_timeout()));
    auto& gloo_options = gloo_options_;
    // GLOO_SOCKET_IFNAME picks the network interface on a multi-homed
    // machine; otherwise gloo binds to the address this host name resolves
    // to, or loopback when the job is all on this machine.
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"))
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (world.master_addr == "127.0.0.1" || world.master_addr == "localhost")
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    gloo_options->threads = 2;
    connect(store_);
  }

  // A group: a process group of its own over a prefixed view of the job's
  // store, so its connections (and its traffic) are its own.
  GlooCommunicator(int rank, int size, CommOptions options, c10::intrusive_ptr<c10d::Store> store,
                   c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> gloo_options, const std::string& key)
      : Communicator(rank, size, std::move(options)), store_(std::move(store)), gloo_options_(std::move(gloo_options)),
        payloads_(timeout()) {
    connect(c10::make_intrusive<c10d::PrefixStore>("distlab/" + key, store_));
  }

  std::string backend() const override { return "gloo"; }

 protected:
  WorkPtr do_isend(const at::Tensor& tensor, int peer, int tag) override {
    require_cpu("send", tensor);
    payloads_.rethrow_failure();
    return send_checked(*headers_, *group_, payloads_, tensor, peer, tag, describe("send", peer, tag), timeout());
  }

  WorkPtr do_irecv(at::Tensor& tensor, int peer, int tag) override {
    require_cpu("recv", tensor);
    payloads_.rethrow_failure();
    return recv_checked(headers_, group_, tensor, peer, tag, describe("recv", peer, tag), timeout());
  }

  // A collective's pieces (collectives/executor.cpp), the call checked once
  // (post_call_check): gloo's own send and recv, no header, no copy.
  // Gloo alone refuses no misfit (a shorter message fills part of its recv
  // without a word, a longer one ends the process on an assertion in gloo's
  // network thread), so these carry only messages whose sizes are known to
  // agree.
  WorkPtr do_isend_agreed(const at::Tensor& tensor, int peer, int tag) override {
    require_cpu("send", tensor);
    payloads_.rethrow_failure();
    std::vector<at::Tensor> tensors{tensor};
    return wrap([&] { return group_->send(tensors, peer, tag); }, describe("send", peer, tag), peer);
  }

  WorkPtr do_irecv_agreed(at::Tensor& tensor, int peer, int tag) override {
    require_cpu("recv", tensor);
    payloads_.rethrow_failure();
    std::vector<at::Tensor> tensors{tensor};
    return wrap([&] { return group_->recv(tensors, peer, tag); }, describe("recv", peer, tag), peer);
  }

  bool do_agreed_unchecked() const override { return true; }

  std::unique_ptr<Communicator> do_split(const std::vector<int>& members, const std::string& key,
                                         CommOptions options) override {
    const int mine = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    return std::make_unique<GlooCommunicator>(mine, static_cast<int>(members.size()), std::move(options), store_,
                                              gloo_options_, key);
  }

  void do_settle() override { PayloadSends::drain_all(); }  // every group's, not only this one's

  void do_barrier() override {
    wrap([&] { return group_->barrier(); }, self() + ": barrier", -1)->wait();
  }

  void do_broadcast(at::Tensor& tensor, int root) override {
    require_cpu("broadcast", tensor);
    // LibTorch 1.13's gloo has no bfloat16; a broadcast only copies bits,
    // so it moves them as another 2-byte type it has.
    std::vector<at::Tensor> tensors{tensor.scalar_type() == at::kBFloat16 ? tensor.view(at::kHalf) : tensor};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    wrap([&] { return group_->broadcast(tensors, opts); }, self() + ": broadcast", root)
        ->wait();
  }

  void do_reduce(at::Tensor& tensor, int root, ReduceOp op) override {
    require_cpu("reduce", tensor);
    if (tensor.scalar_type() == at::kBFloat16) return widened(tensor, [&](at::Tensor& t) { do_reduce(t, root, op); });
    // gloo's reduce leaves garbage in non-root buffers; DistLab promises
    // they are untouched, so non-roots reduce a copy.
    at::Tensor work_tensor = rank() == root ? tensor : tensor.clone();
    std::vector<at::Tensor> tensors{work_tensor};
    c10d::ReduceOptions opts;
    opts.rootRank = root;
    opts.reduceOp = to_c10d(op);
    wrap([&] { return group_->reduce(tensors, opts); }, self() + ": reduce", root)->wait();
    if (rank() == root) finish_average(tensor, op, size());
  }

  void do_all_reduce(at::Tensor& tensor, ReduceOp op) override {
    require_cpu("all_reduce", tensor);
    if (tensor.scalar_type() == at::kBFloat16) return widened(tensor, [&](at::Tensor& t) { do_all_reduce(t, op); });
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions opts;
    opts.reduceOp = to_c10d(op);
    wrap([&] { return group_->allreduce(tensors, opts); }, self() + ": all_reduce", -1)
        ->wait();
    finish_average(tensor, op, size());
  }

  void do_all_to_all(const at::Tensor& input, at::Tensor& output, const std::vector<int64_t>& send_counts,
                     const std::vector<int64_t>& recv_counts) override {
    require_cpu("all_to_all", input);
    // A copy, so bfloat16 (which LibTorch 1.13's gloo lacks) moves as another
    // 2-byte type.
    auto moved = [](const at::Tensor& t) { return t.scalar_type() == at::kBFloat16 ? t.view(at::kHalf) : t; };
    at::Tensor in = moved(input), out = moved(output);
    std::vector<int64_t> sends = send_counts, recvs = recv_counts;
    wrap([&] { return group_->alltoall_base(out, in, recvs, sends); }, self() + ": all_to_all", -1)->wait();
  }

 protected:
  void require_cpu(const char* op, const at::Tensor& tensor) const {
    if (!tensor.device().is_cpu())
      throw CommError(self() + ": " + op +
                      ": the gloo backend carries CPU tensors; use --backend nccl for CUDA tensors");
  }

  // LibTorch 1.13's gloo cannot add bfloat16: reduce a float32 copy (more
  // precise than bfloat16 additions) and round the result once.
  template <typename Reduce>
  void widened(at::Tensor& tensor, Reduce reduce) {
    at::Tensor wide = tensor.to(at::kFloat);
    reduce(wide);
    tensor.copy_(wide);
  }

  template <typename Start>
  WorkPtr wrap(Start start, const std::string& what, int peer) {
    try {
      return std::make_shared<GlooWork>(start(), what, timeout(), peer);
    } catch (const std::exception& e) {
      rethrow_gloo(what, e, timeout(), peer);
    }
  }

  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }
  const c10::intrusive_ptr<c10d::ProcessGroupGloo::Options>& gloo_options() const { return gloo_options_; }

 private:
  // Two groups of the same ranks: one for the data, one for the headers of
  // point-to-point messages (comm/gloo_p2p.hpp).
  void connect(const c10::intrusive_ptr<c10d::Store>& store) {
    try {
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank(), size(), gloo_options_);
      headers_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>("headers", store), rank(), size(), gloo_options_);
    } catch (const std::exception& e) {
      std::string why = e.what();
      throw SetupError("rank " + std::to_string(world_rank()) + ": gloo could not connect all ranks of " + group() +
                       ": " + why.substr(0, why.find('\n')));
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> gloo_options_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_, headers_;
  // Declared last, so destroyed first: waits for the payloads still
  // travelling while their groups still stand.
  PayloadSends payloads_;
};

}  // namespace distlab::comm
