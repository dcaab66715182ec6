#include "comm/gloo_p2p.hpp"

#include <ATen/ATen.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "comm/message_text.hpp"

namespace distlab::comm {
namespace {

// A message's header: what the sender's tensor holds.
struct Header {
  int64_t bytes = 0;
  int64_t dtype = 0;
  int64_t numel = 0;
};

at::Tensor header_tensor(const Header& h) {
  at::Tensor t = at::empty({3}, at::kLong);
  auto* p = t.data_ptr<int64_t>();
  p[0] = h.bytes;
  p[1] = h.dtype;
  p[2] = h.numel;
  return t;
}

Header header_of(const at::Tensor& t) {
  return {static_cast<int64_t>(t.numel() * t.element_size()), static_cast<int64_t>(t.scalar_type()), t.numel()};
}

bool same(const Header& a, const Header& b) { return a.bytes == b.bytes && a.dtype == b.dtype && a.numel == b.numel; }

// A header some tensor has: a dtype tensors are made of, and its bytes the count's.
bool well_formed(const Header& h) {
  const std::optional<c10::ScalarType> type = tensor_dtype(h.dtype);
  if (!type || h.numel < 0) return false;
  int64_t bytes = 0;
  return !__builtin_mul_overflow(h.numel, static_cast<int64_t>(c10::elementSize(*type)), &bytes) && bytes == h.bytes;
}

class CheckedRecv : public Work {
 public:
  CheckedRecv(c10::intrusive_ptr<GlooGroup> data, GlooWorkPtr header_work, at::Tensor header, at::Tensor tensor,
              int peer, int tag, std::string what, Milliseconds timeout)
      : data_(std::move(data)), header_work_(std::move(header_work)), header_(std::move(header)),
        tensor_(std::move(tensor)), peer_(peer), tag_(tag), what_(std::move(what)), timeout_(timeout) {}

  void wait() override { wait_up_to(timeout_); }

  void wait_up_to(Milliseconds limit) override {
    if (done_) return;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    wait_gloo(header_work_, what_, limit, peer_);
    const auto* p = header_.data_ptr<int64_t>();
    const int64_t words[3] = {p[0], p[1], p[2]};
    const Header sent{words[0], words[1], words[2]}, expected = header_of(tensor_);
    // The rest of the limit for the payload, which the peer has already
    // posted; at least a moment, so a slow header does not fail it at once.
    const auto left = std::max(Milliseconds(1000), std::chrono::duration_cast<Milliseconds>(
                                                       deadline - std::chrono::steady_clock::now()));
    switch (judge_header(words, tensor_)) {
      case HeaderVerdict::kFits: break;
      case HeaderVerdict::kMisfit: {
        // Take the payload anyway (the peer's send completes, the next message
        // on this tag is the next one sent), then refuse it.
        at::Tensor scratch = at::empty({sent.bytes}, at::kByte);
        receive(scratch, left);
        done_ = true;
        throw CommError(misfit_text(what_, peer_, sent.dtype, sent.numel, expected.dtype, expected.numel));
      }
      case HeaderVerdict::kMalformed:
        done_ = true;
        throw CommError(what_ + ": rank " + std::to_string(peer_) + " sent a header no tensor has (" +
                        std::to_string(sent.bytes) + " bytes, dtype " + std::to_string(sent.dtype) + ", " +
                        std::to_string(sent.numel) + " elements): its messages are out of step with this rank's");
    }
    receive(tensor_, left);
    done_ = true;
  }

  bool is_completed() override { return done_; }

 private:
  void receive(at::Tensor& into, Milliseconds limit) {
    std::vector<at::Tensor> tensors{into};
    GlooWorkPtr work;
    try {
      work = data_->recv(tensors, peer_, tag_);
    } catch (const std::exception& e) {
      rethrow_gloo(what_, e, limit, peer_);
    }
    wait_gloo(work, what_, limit, peer_);
  }

  c10::intrusive_ptr<GlooGroup> data_;
  GlooWorkPtr header_work_;
  at::Tensor header_, tensor_;
  int peer_, tag_;
  std::string what_;
  Milliseconds timeout_;
  bool done_ = false;
};

// Every PayloadSends alive in this process, for drain_all().
struct Registry {
  std::mutex mutex;
  std::set<PayloadSends*> alive;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: outlives every PayloadSends
  return *r;
}

}  // namespace

PayloadSends::PayloadSends(Milliseconds timeout) : timeout_(timeout) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().alive.insert(this);
}

void PayloadSends::drain_all() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  for (PayloadSends* p : registry().alive) p->drain();
}

PayloadSends::~PayloadSends() {
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().alive.erase(this);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PayloadSends::add(GlooWorkPtr work, at::Tensor payload, std::string what, int peer) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back({std::move(work), std::move(payload), std::move(what), peer});
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_all();
}

void PayloadSends::rethrow_failure() {
  std::exception_ptr failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::swap(failure, failure_);
  }
  if (failure) std::rethrow_exception(failure);
}

void PayloadSends::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return pending_.empty() && in_hand_ == 0; });
}

void PayloadSends::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping, nothing left
    std::optional<Pending> next(std::move(pending_.front()));
    pending_.pop_front();
    ++in_hand_;
    lock.unlock();
    std::exception_ptr failure;
    try {
      wait_gloo(next->work, next->what, timeout_, next->peer);
    } catch (...) {
      failure = std::current_exception();
    }
    next.reset();  // the copy is freed before drain() hears of it
    lock.lock();
    --in_hand_;
    if (failure && !failure_) failure_ = failure;
    changed_.notify_all();
  }
}

HeaderVerdict judge_header(const int64_t (&words)[3], const at::Tensor& expected) {
  const Header sent{words[0], words[1], words[2]};
  if (same(sent, header_of(expected))) return HeaderVerdict::kFits;
  return well_formed(sent) ? HeaderVerdict::kMisfit : HeaderVerdict::kMalformed;
}

WorkPtr send_checked(GlooGroup& headers, GlooGroup& data, PayloadSends& payloads, const at::Tensor& tensor,
                     int peer, int tag, const std::string& what, Milliseconds timeout) {
  payloads.rethrow_failure();
  std::vector<at::Tensor> header{header_tensor(header_of(tensor))};
  std::vector<at::Tensor> payload{tensor.clone()};
  try {
    GlooWorkPtr header_work = headers.send(header, peer, tag);
    payloads.add(data.send(payload, peer, tag), payload.front(), what, peer);
    return std::make_shared<GlooWork>(std::move(header_work), what, timeout, peer);
  } catch (const std::exception& e) {
    rethrow_gloo(what, e, timeout, peer);
  }
}

WorkPtr recv_checked(const c10::intrusive_ptr<GlooGroup>& headers, const c10::intrusive_ptr<GlooGroup>& data,
                     at::Tensor& tensor, int peer, int tag, const std::string& what, Milliseconds timeout) {
  std::vector<at::Tensor> header{at::empty({3}, at::kLong)};
  try {
    GlooWorkPtr header_work = headers->recv(header, peer, tag);
    return std::make_shared<CheckedRecv>(data, std::move(header_work), header.front(), tensor, peer, tag, what,
                                         timeout);
  } catch (const std::exception& e) {
    rethrow_gloo(what, e, timeout, peer);
  }
}

}  // namespace distlab::comm
