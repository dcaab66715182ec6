#include "comm/communicator.hpp"

#include <ATen/ATen.h>

#include <sstream>

#include "trace/clock.hpp"

namespace distlab::comm {
namespace {

// Wraps a backend's Work so the trace gets one event per message, spanning
// from the call that posted it to the wait that saw it done.
class TracedWork : public Work {
 public:
  TracedWork(WorkPtr inner, trace::Recorder* recorder, trace::Event event)
      : inner_(std::move(inner)), recorder_(recorder), event_(std::move(event)) {}
  void wait() override {
    inner_->wait();
    if (!recorded_) {
      recorded_ = true;
      event_.end_us = trace::now_us();
      recorder_->record(event_);
    }
  }
  bool is_completed() override { return inner_->is_completed(); }

 private:
  WorkPtr inner_;
  trace::Recorder* recorder_;
  trace::Event event_;
  bool recorded_ = false;
};

std::string type_name(const at::Tensor& t) { return std::string(c10::toString(t.scalar_type())); }

}  // namespace

Communicator::Communicator(int rank, int size, CommOptions options)
    : rank_(rank), size_(size), options_(std::move(options)) {
  if (size < 1) throw SetupError("world size must be at least 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size)
    throw SetupError("rank " + std::to_string(rank) + " is outside the world of size " + std::to_string(size));
}

std::string Communicator::describe(const char* op, int peer, int tag) const {
  std::ostringstream out;
  out << "rank " << rank_ << ": " << op << (std::string(op) == "send" ? " to" : " from") << " rank " << peer
      << " (tag " << tag << ")";
  return out.str();
}

void Communicator::check_peer(const char* op, int peer, int tag) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    throw CommError(describe(op, peer, tag) + ": peer must be another rank in [0, " + std::to_string(size_) + ")");
  if (tag < 0) throw CommError(describe(op, peer, tag) + ": tags are >= 0");
}

void Communicator::check_tensor(const char* op, const at::Tensor& tensor) const {
  if (!tensor.defined())
    throw CommError("rank " + std::to_string(rank_) + ": " + op + " of an undefined tensor");
  if (!tensor.is_contiguous())
    throw CommError("rank " + std::to_string(rank_) + ": " + op + " needs a contiguous tensor (call .contiguous())");
}

void Communicator::check_root(const char* op, int root) const {
  if (root < 0 || root >= size_)
    throw CommError("rank " + std::to_string(rank_) + ": " + op + " root " + std::to_string(root) +
                    " is outside [0, " + std::to_string(size_) + ")");
}

uint64_t Communicator::next_seq(std::map<std::pair<int, int>, uint64_t>& counters, int peer, int tag) {
  std::lock_guard<std::mutex> lock(seq_mutex_);
  return counters[{peer, tag}]++;
}

WorkPtr Communicator::isend(const at::Tensor& tensor, int peer, int tag) {
  check_peer("send", peer, tag);
  check_tensor("send", tensor);
  // Counted even when tracing is off so that flow ids stay in step if a
  // recorder is attached later.
  const uint64_t flow = trace::flow_id(rank_, peer, tag, next_seq(send_seq_, peer, tag));
  const int64_t begin = trace::now_us();
  return traced("send", tensor, peer, tag, flow, begin, do_isend(tensor, peer, tag));
}

WorkPtr Communicator::irecv(at::Tensor& tensor, int peer, int tag) {
  check_peer("recv", peer, tag);
  check_tensor("recv", tensor);
  const uint64_t flow = trace::flow_id(peer, rank_, tag, next_seq(recv_seq_, peer, tag));
  const int64_t begin = trace::now_us();
  return traced("recv", tensor, peer, tag, flow, begin, do_irecv(tensor, peer, tag));
}

WorkPtr Communicator::traced(const char* op, const at::Tensor& tensor, int peer, int tag, uint64_t flow,
                             int64_t begin_us, WorkPtr work) {
  if (recorder() == nullptr || !recorder()->enabled()) return work;
  trace::Event e{rank_, trace::kLaneComm, op, op, begin_us, 0, static_cast<int64_t>(tensor.nbytes()), peer, flow,
                 {{"tag", std::to_string(tag)}, {"dtype", type_name(tensor)}}};
  return std::make_shared<TracedWork>(std::move(work), recorder(), std::move(e));
}

void Communicator::barrier() {
  trace::Span span(recorder(), rank_, trace::kLaneComm, "barrier", "collective");
  do_barrier();
}

void Communicator::native_broadcast(at::Tensor& tensor, int root) {
  check_tensor("broadcast", tensor);
  check_root("broadcast", root);
  trace::Span span(recorder(), rank_, trace::kLaneComm, "native broadcast", "collective");
  span.set_bytes(static_cast<int64_t>(tensor.nbytes())).arg("root", root).arg("algorithm", "native");
  if (size_ > 1) do_broadcast(tensor, root);
}

void Communicator::native_reduce(at::Tensor& tensor, int root, ReduceOp op) {
  check_tensor("reduce", tensor);
  check_root("reduce", root);
  trace::Span span(recorder(), rank_, trace::kLaneComm, "native reduce", "collective");
  span.set_bytes(static_cast<int64_t>(tensor.nbytes())).arg("root", root).arg("op", to_string(op));
  if (size_ > 1) do_reduce(tensor, root, op);
}

void Communicator::native_all_reduce(at::Tensor& tensor, ReduceOp op) {
  check_tensor("all_reduce", tensor);
  trace::Span span(recorder(), rank_, trace::kLaneComm, "native all_reduce", "collective");
  span.set_bytes(static_cast<int64_t>(tensor.nbytes())).arg("op", to_string(op));
  if (size_ > 1) do_all_reduce(tensor, op);
}

void throw_timeout(const std::string& what, Milliseconds timeout, const std::string& hint) {
  std::ostringstream out;
  out << what << " did not complete within " << timeout.count() << " ms";
  if (!hint.empty()) out << ". " << hint;
  throw TimeoutError(out.str());
}

}  // namespace distlab::comm
