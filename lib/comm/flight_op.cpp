#include "comm/flight_op.hpp"

#include <stdexcept>

#include "flight/recorder.hpp"
#include "flight/site.hpp"

namespace distlab::comm {
namespace {

// How many recorded operations this thread is inside.
thread_local int nesting = 0;

flight::Entry entry_of(const Communicator& comm, const char* kind, const char* op, const at::Tensor& tensor) {
  flight::Entry e;
  e.group = comm.group();
  e.group_rank = comm.rank();
  e.kind = kind;
  e.op = op;
  if (tensor.defined()) {
    e.dtype = dtype_name(tensor);
    e.shape.assign(tensor.sizes().begin(), tensor.sizes().end());
    e.bytes = static_cast<int64_t>(tensor.nbytes());
  }
  e.site = flight::current_site();
  return e;
}

class FlightWork : public Work {
 public:
  FlightWork(WorkPtr inner, FlightOp op) : inner_(std::move(inner)), op_(std::move(op)) {}
  void wait() override {
    op_.start();
    try {
      inner_->wait();
    } catch (const std::exception& e) {
      op_.fail(e);
      throw;
    }
    op_.complete();
  }
  void wait_up_to(Milliseconds limit) override {
    op_.start();
    try {
      inner_->wait_up_to(limit);
    } catch (const std::exception& e) {
      op_.fail(e);
      throw;
    }
    op_.complete();
  }
  bool is_completed() override { return inner_->is_completed(); }

 private:
  WorkPtr inner_;
  FlightOp op_;
};

}  // namespace

FlightNesting::FlightNesting() { ++nesting; }
FlightNesting::~FlightNesting() { --nesting; }

FlightOp FlightOp::collective(Communicator& comm, const char* op, const char* algorithm, const at::Tensor& tensor,
                              int root) {
  FlightOp rec;
  if (nesting > 0) return rec;
  // Counted even with the recorder off, so that turning it on mid-job
  // cannot make two ranks disagree.
  const uint64_t seq = comm.next_collective_seq();
  flight::Ring* ring = comm.flight_ring();
  if (ring == nullptr || !ring->on()) return rec;
  flight::Entry e = entry_of(comm, "collective", op, tensor);
  e.seq = seq;
  e.algorithm = algorithm;
  e.root = root >= 0 ? comm.world_rank_of(root) : -1;
  rec.ring_ = comm.flight_ring_ptr();
  rec.recorder_ = comm.flight_recorder();
  rec.id_ = ring->enter(std::move(e));
  return rec;
}

FlightOp FlightOp::p2p(Communicator& comm, const char* op, const at::Tensor& tensor, int peer, int tag, uint64_t seq) {
  FlightOp rec;
  flight::Ring* ring = comm.flight_ring();
  if (nesting > 0 || ring == nullptr || !ring->on()) return rec;
  flight::Entry e = entry_of(comm, "p2p", op, tensor);
  e.seq = seq;
  e.peer = comm.world_rank_of(peer);
  e.tag = tag;
  rec.ring_ = comm.flight_ring_ptr();
  rec.recorder_ = comm.flight_recorder();
  rec.id_ = ring->enter(std::move(e));
  return rec;
}

void FlightOp::start() {
  if (ring_) ring_->start(id_);
}

void FlightOp::complete() {
  if (ring_) ring_->end(id_, flight::State::kCompleted);
}

void FlightOp::fail(const std::exception& e) {
  if (!ring_) return;
  const bool timed_out = dynamic_cast<const TimeoutError*>(&e) != nullptr;
  const bool aborted = dynamic_cast<const JobAborted*>(&e) != nullptr;
  ring_->end(id_, timed_out ? flight::State::kTimedOut : flight::State::kFailed, e.what());
  const std::string what = e.what();
  recorder_->dump(std::string(timed_out ? "timeout" : aborted ? "job aborted" : "error") + ": " + what);
}

WorkPtr flight_work(WorkPtr work, FlightOp op) {
  if (!op.active()) return work;
  return std::make_shared<FlightWork>(std::move(work), std::move(op));
}

std::string dtype_name(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return c10::toString(tensor.scalar_type());
  }
}

std::shared_ptr<flight::Recorder> make_flight_recorder(const std::string& dir) {
  try {
    return flight::Recorder::create(flight::RecorderOptions::from_env(dir));
  } catch (const std::invalid_argument& e) {
    throw SetupError(e.what());
  }
}

}  // namespace distlab::comm
