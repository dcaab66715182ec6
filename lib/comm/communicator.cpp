#include "comm/communicator.hpp"

#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <sstream>

#include "comm/flight_op.hpp"
#include "flight/recorder.hpp"
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
    record_once();
  }
  void wait_up_to(Milliseconds limit) override {
    inner_->wait_up_to(limit);
    record_once();
  }
  bool is_completed() override { return inner_->is_completed(); }

 private:
  void record_once() {
    if (recorded_) return;
    recorded_ = true;
    event_.end_us = trace::now_us();
    recorder_->record(event_);
  }

  WorkPtr inner_;
  trace::Recorder* recorder_;
  trace::Event event_;
  bool recorded_ = false;
};

std::string type_name(const at::Tensor& t) { return std::string(c10::toString(t.scalar_type())); }

// Starts a send or recv under its flight record: a backend that throws
// marks the record failed before the error goes on.
template <typename Start>
WorkPtr started_under(FlightOp& flight, Start&& start) {
  try {
    return start();
  } catch (const std::exception& e) {
    flight.fail(e);
    throw;
  }
}

}  // namespace

Communicator::Communicator(int rank, int size, CommOptions options)
    : rank_(rank), size_(size), options_(std::move(options)) {
  if (size < 1) throw SetupError("world size must be at least 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size)
    throw SetupError("rank " + std::to_string(rank) + " is outside the world of size " + std::to_string(size));
  if (!options_.world_ranks.empty() && static_cast<int>(options_.world_ranks.size()) != size)
    throw SetupError("group " + options_.group + " lists " + std::to_string(options_.world_ranks.size()) +
                     " world ranks for " + std::to_string(size) + " members");
  // Flow ids pair a send with its recv from (src, dst, tag, n-th message);
  // the group's name joins the tag so that two groups over the same pair of
  // processes never share an id.
  if (!is_world()) flow_salt_ = std::hash<std::string>{}(options_.group) << 24;
  // One ring per job-wide rank: a group's communicator finds its world's.
  if (!options_.flight) options_.flight = make_flight_recorder();
  flight_ring_ = options_.flight->ring_of(world_rank(), size_);
  std::vector<int> members = options_.world_ranks;
  if (is_world()) {
    members.resize(static_cast<size_t>(size_));
    std::iota(members.begin(), members.end(), 0);
  }
  flight_ring_->add_group(options_.group, members);
}

int Communicator::world_rank_of(int rank) const {
  if (options_.world_ranks.empty() || rank < 0 || rank >= size_) return rank;
  return options_.world_ranks[static_cast<size_t>(rank)];
}

// World: "rank 2: recv from rank 0 (tag 5)". Group: job-wide ranks first,
// then where they sit in the group:
// "rank 3 (stage1 rank 1): recv from rank 2 (stage1 rank 0) (tag 5)".
std::string Communicator::describe(const char* op, int peer, int tag) const {
  std::ostringstream out;
  auto who = [&](int r) {
    out << "rank " << world_rank_of(r);
    if (!is_world()) out << " (" << options_.group << " rank " << r << ")";
  };
  who(rank_);
  out << ": " << op << (std::string(op) == "send" ? " to " : " from ");
  who(peer);
  out << " (tag " << tag << ")";
  return out.str();
}

std::string Communicator::self() const {
  std::string out = "rank " + std::to_string(world_rank());
  if (!is_world()) out += " (" + options_.group + " rank " + std::to_string(rank_) + ")";
  return out;
}

void Communicator::label(trace::Span& span) const {
  if (!is_world()) span.arg("group", options_.group).arg("group_rank", rank_);
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
  return post_send(tensor, peer, tag, /*agreed=*/false);
}

WorkPtr Communicator::irecv(at::Tensor& tensor, int peer, int tag) {
  return post_recv(tensor, peer, tag, /*agreed=*/false);
}

WorkPtr Communicator::isend_agreed(const at::Tensor& tensor, int peer, int tag) {
  return post_send(tensor, peer, tag, /*agreed=*/true);
}

WorkPtr Communicator::irecv_agreed(at::Tensor& tensor, int peer, int tag) {
  return post_recv(tensor, peer, tag, /*agreed=*/true);
}

WorkPtr Communicator::post_send(const at::Tensor& tensor, int peer, int tag, bool agreed) {
  check_peer("send", peer, tag);
  check_tensor("send", tensor);
  // Counted even when tracing is off so that flow ids stay in step if a
  // recorder is attached later.
  const uint64_t n = next_seq(send_seq_, peer, tag);
  const uint64_t flow = trace::flow_id(world_rank(), world_rank_of(peer), static_cast<int64_t>(tag + flow_salt_), n);
  const int64_t begin = trace::now_us();
  FlightOp flight = FlightOp::p2p(*this, "send", tensor, peer, tag, n);
  WorkPtr work = started_under(
      flight, [&] { return agreed ? do_isend_agreed(tensor, peer, tag) : do_isend(tensor, peer, tag); });
  return flight_work(traced("send", tensor, peer, tag, flow, begin, std::move(work)), std::move(flight));
}

WorkPtr Communicator::post_recv(at::Tensor& tensor, int peer, int tag, bool agreed) {
  check_peer("recv", peer, tag);
  check_tensor("recv", tensor);
  const uint64_t n = next_seq(recv_seq_, peer, tag);
  const uint64_t flow = trace::flow_id(world_rank_of(peer), world_rank(), static_cast<int64_t>(tag + flow_salt_), n);
  const int64_t begin = trace::now_us();
  FlightOp flight = FlightOp::p2p(*this, "recv", tensor, peer, tag, n);
  WorkPtr work = started_under(
      flight, [&] { return agreed ? do_irecv_agreed(tensor, peer, tag) : do_irecv(tensor, peer, tag); });
  return flight_work(traced("recv", tensor, peer, tag, flow, begin, std::move(work)), std::move(flight));
}

std::vector<WorkPtr> Communicator::post_call_check(const at::Tensor& call, const std::vector<int>& to,
                                                  const std::vector<int>& from, std::vector<at::Tensor>& theirs,
                                                  int tag) {
  check_tensor("send", call);
  theirs.clear();
  theirs.reserve(from.size());  // a backend's recv may hold on to the tensor it was given
  std::vector<WorkPtr> works;
  for (int peer : from) {
    check_peer("recv", peer, tag);
    theirs.push_back(at::empty_like(call));
    works.push_back(do_irecv_agreed(theirs.back(), peer, tag));
  }
  for (int peer : to) {
    check_peer("send", peer, tag);
    works.push_back(do_isend_agreed(call, peer, tag));
  }
  return works;
}

WorkPtr Communicator::traced(const char* op, const at::Tensor& tensor, int peer, int tag, uint64_t flow,
                             int64_t begin_us, WorkPtr work) {
  if (recorder() == nullptr || !recorder()->enabled()) return work;
  trace::Event e{world_rank(), trace::kLaneComm, op, op, begin_us, 0, static_cast<int64_t>(tensor.nbytes()),
                 world_rank_of(peer), flow, {{"tag", std::to_string(tag)}, {"dtype", type_name(tensor)}}};
  if (!is_world()) e.args.emplace_back("group", options_.group);
  return std::make_shared<TracedWork>(std::move(work), recorder(), std::move(e));
}

void Communicator::barrier() {
  FlightOp::collective(*this, "barrier", "native", at::Tensor(), -1).run([&] {
    trace::Span span(recorder(), world_rank(), trace::kLaneComm, "barrier", "collective");
    label(span);
    do_barrier();
  });
}

void Communicator::native_broadcast(at::Tensor& tensor, int root) {
  check_tensor("broadcast", tensor);
  check_root("broadcast", root);
  FlightOp::collective(*this, "broadcast", "native", tensor, root).run([&] {
    trace::Span span(recorder(), world_rank(), trace::kLaneComm, "native broadcast", "collective");
    label(span);
    span.set_bytes(static_cast<int64_t>(tensor.nbytes())).arg("root", root).arg("algorithm", "native");
    if (size_ > 1) do_broadcast(tensor, root);
  });
}

void Communicator::native_reduce(at::Tensor& tensor, int root, ReduceOp op) {
  check_tensor("reduce", tensor);
  check_root("reduce", root);
  FlightOp::collective(*this, "reduce", "native", tensor, root).run([&] {
    trace::Span span(recorder(), world_rank(), trace::kLaneComm, "native reduce", "collective");
    label(span);
    span.set_bytes(static_cast<int64_t>(tensor.nbytes())).arg("root", root).arg("op", to_string(op));
    if (size_ > 1) do_reduce(tensor, root, op);
  });
}

void Communicator::native_all_reduce(at::Tensor& tensor, ReduceOp op) {
  check_tensor("all_reduce", tensor);
  FlightOp::collective(*this, "all_reduce", "native", tensor, -1).run([&] {
    trace::Span span(recorder(), world_rank(), trace::kLaneComm, "native all_reduce", "collective");
    label(span);
    span.set_bytes(static_cast<int64_t>(tensor.nbytes())).arg("op", to_string(op));
    if (size_ > 1) do_all_reduce(tensor, op);
  });
}

void Communicator::native_all_reduce_parts(const std::vector<at::Tensor>& parts, double scale) {
  if (parts.empty()) throw CommError(self() + ": all_reduce of no parts");
  int64_t numel = 0;
  for (const at::Tensor& part : parts) {
    check_tensor("all_reduce", part);
    if (part.scalar_type() != parts.front().scalar_type() || part.device() != parts.front().device())
      throw CommError(self() + ": all_reduce of parts needs one dtype and device, not " +
                      c10::toString(parts.front().scalar_type()) + " on " + parts.front().device().str() + " and " +
                      c10::toString(part.scalar_type()) + " on " + part.device().str());
    numel += part.numel();
  }
  // What the flight recorder and the trace see: one tensor of all the parts' elements.
  const at::Tensor whole = at::empty({numel}, parts.front().options().device(at::kMeta));
  FlightOp::collective(*this, "all_reduce", "native", whole, -1).run([&] {
    trace::Span span(recorder(), world_rank(), trace::kLaneComm, "native all_reduce", "collective");
    label(span);
    span.set_bytes(static_cast<int64_t>(whole.nbytes())).arg("op", "sum").arg("parts", parts.size());
    do_all_reduce_parts(parts, scale);
  });
}

void Communicator::do_all_reduce_parts(const std::vector<at::Tensor>& parts, double scale) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& part : parts) flat.push_back(part.view({-1}));
  at::Tensor buffer = at::cat(flat);
  if (scale != 1.0) buffer.mul_(at::native::wrapped_scalar_tensor(scale));
  if (size_ > 1) do_all_reduce(buffer, ReduceOp::kSum);
  int64_t offset = 0;
  for (at::Tensor& part : flat) {
    part.copy_(buffer.narrow(0, offset, part.numel()));
    offset += part.numel();
  }
}

void Communicator::native_all_to_all(const at::Tensor& input, at::Tensor& output,
                                     const std::vector<int64_t>& send_counts,
                                     const std::vector<int64_t>& recv_counts) {
  check_tensor("all_to_all", input);
  check_tensor("all_to_all", output);
  auto total = [](const std::vector<int64_t>& counts) {
    return std::accumulate(counts.begin(), counts.end(), int64_t{0});
  };
  if (send_counts.size() != static_cast<size_t>(size_) || recv_counts.size() != static_cast<size_t>(size_) ||
      total(send_counts) != input.numel() || total(recv_counts) != output.numel() ||
      input.scalar_type() != output.scalar_type())
    throw CommError(self() + ": all_to_all: the counts (" + std::to_string(send_counts.size()) + " to send adding up to " +
                    std::to_string(total(send_counts)) + ", " + std::to_string(recv_counts.size()) +
                    " to receive adding up to " + std::to_string(total(recv_counts)) + ") do not fit " +
                    std::to_string(size_) + " ranks, input " + std::to_string(input.numel()) + " and output " +
                    std::to_string(output.numel()) + " elements of one dtype");
  FlightOp::collective(*this, "all_to_all", "native", input, -1).run([&] {
    trace::Span span(recorder(), world_rank(), trace::kLaneComm, "native all_to_all", "collective");
    label(span);
    span.set_bytes(static_cast<int64_t>(input.nbytes()));
    if (size_ == 1)
      output.copy_(input);
    else
      do_all_to_all(input, output, send_counts, recv_counts);
  });
}

void Communicator::do_all_to_all(const at::Tensor&, at::Tensor&, const std::vector<int64_t>&,
                                 const std::vector<int64_t>&) {
  throw CommError(self() + ": the " + backend() +
                  " backend has no all-to-all of its own; collectives::all_to_all's pairwise plan runs on it");
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const std::string& name) {
  // Everybody learns everybody's (color, key): an all-gather made of one
  // sum, each rank filling its own two slots of a zeroed buffer.
  at::Tensor all = at::zeros({2 * size_}, at::TensorOptions().dtype(at::kLong).device(device()));
  all[2 * rank_] = color;
  all[2 * rank_ + 1] = key;
  native_all_reduce(all, ReduceOp::kSum);
  all = all.cpu();
  const int64_t* v = all.data_ptr<int64_t>();
  const int call = splits_++;
  if (color < 0) return nullptr;

  std::vector<int> members;
  for (int r = 0; r < size_; ++r)
    if (v[2 * r] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return v[2 * a + 1] < v[2 * b + 1]; });

  CommOptions group_options = options_;
  group_options.world_ranks.clear();
  for (int r : members) group_options.world_ranks.push_back(world_rank_of(r));
  group_options.group = name.empty() ? options_.group + "/" + std::to_string(color) : name;
  // Unique to this call and colour, the same string on every member: the
  // backends key the group's shared state (store prefix, thread mailboxes) by it.
  const std::string unique = options_.group + "/split" + std::to_string(call) + "/color" + std::to_string(color);
  return do_split(members, unique, std::move(group_options));
}

std::unique_ptr<Communicator> Communicator::new_group(const std::vector<int>& ranks, const std::string& name) {
  std::vector<bool> seen(static_cast<size_t>(size_), false);
  int position = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= size_ || seen[static_cast<size_t>(r)])
      throw CommError("rank " + std::to_string(world_rank()) + ": new_group: rank " + std::to_string(r) +
                      (r < 0 || r >= size_ ? " is outside [0, " + std::to_string(size_) + ")" : " is listed twice"));
    seen[static_cast<size_t>(r)] = true;
    if (r == rank_) position = static_cast<int>(i);
  }
  return split(position >= 0 ? 0 : -1, position, name);
}

void throw_timeout(const std::string& what, Milliseconds timeout, const std::string& hint) {
  std::ostringstream out;
  out << what << " did not complete within " << timeout.count() << " ms";
  if (!hint.empty()) out << ". " << hint;
  throw TimeoutError(out.str());
}

}  // namespace distlab::comm
