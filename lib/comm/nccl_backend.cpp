#include "comm/nccl_backend.hpp"

#ifndef DISTLAB_HAVE_NCCL

namespace distlab::comm {
bool nccl_compiled() { return false; }
std::unique_ptr<Communicator> make_nccl_communicator(const WorldInfo&, CommOptions) {
  throw SetupError("this build of DistLab has no NCCL backend (CUDA or NCCL was not found at build time); "
                   "use --backend gloo or threads");
}
}  // namespace distlab::comm

#else

#include <ATen/ATen.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>
#include <thread>

#include "comm/store.hpp"

#ifdef DISTLAB_TORCH_HAS_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace distlab::comm {
namespace {

void check_cuda(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) throw CommError(what + ": CUDA error: " + cudaGetErrorString(status));
}

ncclDataType_t to_nccl(at::ScalarType type, const std::string& what) {
  switch (type) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kChar: return ncclInt8;
    case at::kByte:
    case at::kBool: return ncclUint8;
    default: throw CommError(what + ": NCCL cannot carry " + std::string(c10::toString(type)) + " tensors");
  }
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

// The stream LibTorch launches this rank's kernels on.
cudaStream_t compute_stream(int device) {
#ifdef DISTLAB_TORCH_HAS_CUDA
  return c10::cuda::getCurrentCUDAStream(device).stream();
#else
  (void)device;
  return cudaStreamLegacy;
#endif
}

class NcclCommunicator;

// A CUDA event shared by a Work and the queue that records it: a Work
// dropped before its operation was launched must not leave the queue
// holding a destroyed event.
struct CudaEvent {
  cudaEvent_t handle = nullptr;
  ~CudaEvent() {
    if (handle != nullptr) cudaEventDestroy(handle);
  }
};
using EventPtr = std::shared_ptr<CudaEvent>;

// One operation in flight on the communication stream.
class NcclWork : public Work {
 public:
  NcclWork(NcclCommunicator& owner, EventPtr done, at::Tensor keep_alive, std::string what, int peer)
      : owner_(owner), done_(std::move(done)), keep_alive_(std::move(keep_alive)), what_(std::move(what)),
        peer_(peer) {}
  void wait() override;
  void wait_up_to(Milliseconds limit) override;
  bool is_completed() override;

 private:
  NcclCommunicator& owner_;
  EventPtr done_;
  at::Tensor keep_alive_;  // the tensor's memory must outlive the operation
  std::string what_;
  int peer_;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const WorldInfo& world, CommOptions options)
      : Communicator(world.rank, world.world_size, std::move(options)), device_(world.local_rank) {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0)
      throw SetupError("rank " + std::to_string(rank()) + ": the nccl backend needs a GPU, and none is usable here (" +
                       (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") +
                       "); use --backend gloo or threads");
    if (device_ >= count)
      throw SetupError("rank " + std::to_string(rank()) + ": LOCAL_RANK " + std::to_string(device_) + " but only " +
                       std::to_string(count) +
                       " GPU(s) on this machine. NCCL refuses two ranks on one GPU: start at most one process per "
                       "GPU, or run several ranks on one GPU with --backend threads");
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    store_ = connect_store(world, connect_timeout());
    check_unique_gpus(*store_);
    init("distlab");
  }

  // A group made by split(): a communicator of its own among the members,
  // from a unique id that the group's first member passes through the store
  // under the split's key (only members take part, unlike ncclCommSplit,
  // which every rank of the parent would have to call).
  NcclCommunicator(int rank, int size, CommOptions options, int device, c10::intrusive_ptr<c10d::Store> store,
                   const std::string& key)
      : Communicator(rank, size, std::move(options)), device_(device), store_(std::move(store)) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    init("distlab/" + key);
  }

  ~NcclCommunicator() override {
    if (comm_ != nullptr) {
      if (aborted_)
        ncclCommAbort(comm_);
      else
        ncclCommDestroy(comm_);
    }
    if (ready_ != nullptr) cudaEventDestroy(ready_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  std::string backend() const override { return "nccl"; }

  void init(const std::string& prefix) {
    ncclUniqueId id;
    const std::string key = prefix + "/nccl_unique_id";
    if (rank() == 0) {
      if (ncclGetUniqueId(&id) != ncclSuccess) throw SetupError(self() + ": ncclGetUniqueId failed");
      store_->set(key, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof id));
    } else {
      auto bytes = store_->get(key);  // waits up to the store's timeout
      std::memcpy(&id, bytes.data(), sizeof id);
    }
    // Non-blocking initialisation, polled below, so that a rank that never
    // joins ends in a timeout instead of a hang.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t result = ncclCommInitRankConfig(&comm_, size(), id, rank(), &config);
    if (result != ncclSuccess && result != ncclInProgress)
      throw SetupError(self() + ": ncclCommInitRank failed: " + ncclGetErrorString(result));
    poll_ready(self() + ": NCCL initialisation of " + group(), -1);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
  }

  // Waits for `done`, watching for NCCL errors and `limit`. On timeout the
  // communicator is aborted: NCCL cannot cancel a single operation.
  void wait_for(cudaEvent_t done, const std::string& what, int peer, Milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
      cudaError_t status = cudaEventQuery(done);
      if (status == cudaSuccess) break;
      if (status != cudaErrorNotReady) check_cuda(status, what);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        aborted_ = true;
        throw CommError(what + ": NCCL error: " + ncclGetErrorString(async));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        aborted_ = true;
        throw_timeout(what, limit,
                      peer >= 0 ? "Rank " + std::to_string(peer) + " never did its side (is it still running?)"
                                : "Some rank never joined (is every rank still running?)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    // Later kernels on the compute stream see the received data.
    check_cuda(cudaStreamWaitEvent(compute_stream(device_), done, 0), what);
  }

 protected:
  // NCCL matches point-to-point by order, not by tag: messages of different
  // tags between one pair must be posted in the same order on both sides.
  // A send and a recv launched one after the other on one stream would
  // deadlock a ring (each rank's send waits for a recv queued behind the
  // neighbour's own send), so posted operations are queued and launched
  // together as one NCCL group when the first of them is waited on.
  WorkPtr do_isend(const at::Tensor& tensor, int peer, int tag) override {
    std::string what = describe("send", peer, tag);
    ncclDataType_t type = to_nccl(tensor.scalar_type(), what);
    return enqueue(tensor, std::move(what), peer, [=](cudaStream_t s) {
      return ncclSend(tensor.data_ptr(), tensor.numel(), type, peer, comm_, s);
    });
  }

  WorkPtr do_irecv(at::Tensor& tensor, int peer, int tag) override {
    std::string what = describe("recv", peer, tag);
    ncclDataType_t type = to_nccl(tensor.scalar_type(), what);
    return enqueue(tensor, std::move(what), peer, [=](cudaStream_t s) {
      return ncclRecv(tensor.data_ptr(), tensor.numel(), type, peer, comm_, s);
    });
  }

  std::unique_ptr<Communicator> do_split(const std::vector<int>& members, const std::string& key,
                                         CommOptions options) override {
    const int mine = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    return std::make_unique<NcclCommunicator>(mine, static_cast<int>(members.size()), std::move(options), device_,
                                              store_, key);
  }

  void do_barrier() override {
    auto one = at::ones({1}, at::TensorOptions().device(at::kCUDA, device_));
    do_all_reduce(one, ReduceOp::kSum);
  }

  void do_broadcast(at::Tensor& tensor, int root) override {
    const std::string what = self() + ": broadcast";
    launch(tensor, what, root, [&](cudaStream_t s) {
      return ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(),
                           to_nccl(tensor.scalar_type(), what), root, comm_, s);
    })->wait();
  }

  void do_reduce(at::Tensor& tensor, int root, ReduceOp op) override {
    const std::string what = self() + ": reduce";
    // Non-roots keep their input (DistLab's rule): NCCL only reads it.
    at::Tensor out = rank() == root ? tensor : at::empty_like(tensor);
    launch(tensor, what, root, [&](cudaStream_t s) {
      return ncclReduce(tensor.data_ptr(), out.data_ptr(), tensor.numel(), to_nccl(tensor.scalar_type(), what),
                        to_nccl(op), root, comm_, s);
    })->wait();
  }

  void do_all_reduce(at::Tensor& tensor, ReduceOp op) override {
    const std::string what = self() + ": all_reduce";
    launch(tensor, what, -1, [&](cudaStream_t s) {
      return ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), to_nccl(tensor.scalar_type(), what),
                           to_nccl(op), comm_, s);
    })->wait();
  }

 private:
  struct Queued {
    std::function<ncclResult_t(cudaStream_t)> call;
    EventPtr done;
    std::string what;
    int peer;
  };

  void check_usable(const at::Tensor& tensor, const std::string& what) const {
    if (!tensor.is_cuda() || tensor.get_device() != device_)
      throw CommError(what + ": the nccl backend carries tensors on this rank's GPU (cuda:" + std::to_string(device_) +
                      "), got one on " + tensor.device().str());
    if (aborted_) throw CommError(what + ": the NCCL communicator was aborted after an earlier error");
  }

  EventPtr new_event(const std::string& what) {
    auto event = std::make_shared<CudaEvent>();
    check_cuda(cudaEventCreateWithFlags(&event->handle, cudaEventDisableTiming), what);
    return event;
  }

  WorkPtr enqueue(const at::Tensor& tensor, std::string what, int peer,
                  std::function<ncclResult_t(cudaStream_t)> call) {
    check_usable(tensor, what);
    EventPtr done = new_event(what);
    queued_.push_back(Queued{std::move(call), done, what, peer});
    return std::make_shared<NcclWork>(*this, done, tensor, std::move(what), peer);
  }

 public:
  // Launches every queued send and recv as one NCCL group.
  void flush() {
    if (queued_.empty()) return;
    std::vector<Queued> batch;
    batch.swap(queued_);
    const std::string& what = batch.front().what;
    // The communication stream waits until the compute stream has produced
    // the data (a recorded event, not a host sync).
    check_cuda(cudaEventRecord(ready_, compute_stream(device_)), what);
    check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), what);
    ncclGroupStart();
    for (auto& op : batch) {
      ncclResult_t result = op.call(stream_);
      if (result != ncclSuccess && result != ncclInProgress) {
        ncclGroupEnd();
        aborted_ = true;
        throw CommError(op.what + ": NCCL error: " + ncclGetErrorString(result));
      }
    }
    ncclResult_t result = ncclGroupEnd();
    if (result == ncclInProgress)
      poll_ready(what, batch.front().peer);
    else if (result != ncclSuccess)
      throw CommError(what + ": NCCL error: " + ncclGetErrorString(result));
    for (auto& op : batch) check_cuda(cudaEventRecord(op.done->handle, stream_), op.what);
  }

 private:
  // Runs one collective now (after anything queued), and returns its Work.
  template <typename Call>
  WorkPtr launch(const at::Tensor& tensor, const std::string& what, int peer, Call call) {
    check_usable(tensor, what);
    flush();
    check_cuda(cudaEventRecord(ready_, compute_stream(device_)), what);
    check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), what);
    ncclResult_t result = call(stream_);
    if (result == ncclInProgress) {
      poll_ready(what, peer);
    } else if (result != ncclSuccess) {
      throw CommError(what + ": NCCL error: " + ncclGetErrorString(result));
    }
    EventPtr done = new_event(what);
    check_cuda(cudaEventRecord(done->handle, stream_), what);
    return std::make_shared<NcclWork>(*this, done, tensor, what, peer);
  }

  // Waits while a non-blocking communicator reports ncclInProgress.
  void poll_ready(const std::string& what, int peer) {
    const auto deadline = std::chrono::steady_clock::now() + timeout();
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) {
      ncclCommGetAsyncError(comm_, &state);
      if (state == ncclInProgress && std::chrono::steady_clock::now() > deadline) {
        aborted_ = true;
        throw_timeout(what, timeout(), peer >= 0 ? "Waiting for rank " + std::to_string(peer) : "");
      }
      if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (state != ncclSuccess) {
      aborted_ = true;
      throw CommError(what + ": NCCL error: " + ncclGetErrorString(state));
    }
  }

  // NCCL refuses two ranks on one GPU; say so plainly before it does.
  void check_unique_gpus(c10d::Store& store) {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::string me(host);
    me += "/";
    me.append(reinterpret_cast<const char*>(prop.uuid.bytes), sizeof prop.uuid.bytes);
    store.set("distlab/gpu/" + std::to_string(rank()), std::vector<uint8_t>(me.begin(), me.end()));
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      auto other = store.get("distlab/gpu/" + std::to_string(r));
      if (std::string(other.begin(), other.end()) == me)
        throw SetupError("rank " + std::to_string(rank()) + " and rank " + std::to_string(r) +
                         " are on the same GPU (cuda:" + std::to_string(device_) + " of " + std::string(host) +
                         "). NCCL refuses two ranks on one GPU: run one process per GPU, or put several ranks on "
                         "one GPU with --backend threads --device cuda");
    }
  }

  int device_;
  c10::intrusive_ptr<c10d::Store> store_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  bool aborted_ = false;
  std::vector<Queued> queued_;
};

void NcclWork::wait() { wait_up_to(owner_.timeout()); }

void NcclWork::wait_up_to(Milliseconds limit) {
  owner_.flush();
  owner_.wait_for(done_->handle, what_, peer_, limit);
}

bool NcclWork::is_completed() {
  owner_.flush();  // an event never recorded would read as complete
  return cudaEventQuery(done_->handle) == cudaSuccess;
}

}  // namespace

bool nccl_compiled() { return true; }

std::unique_ptr<Communicator> make_nccl_communicator(const WorldInfo& world, CommOptions options) {
  options.device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(world.local_rank));
  return std::make_unique<NcclCommunicator>(world, std::move(options));
}

}  // namespace distlab::comm

#endif  // DISTLAB_HAVE_NCCL
