// The same-host transport's point-to-point messages (comm/shm_links.hpp):
// a communicator's rings, its sends and recvs, their tags, stash and
// one-copy reads.
#include "comm/shm_links.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <new>

#include "comm/message_text.hpp"
#include "comm/shm_internal.hpp"
#include "comm/store.hpp"

namespace distlab::comm {

using shm::bytes_at;
using shm::bytes_of;
using shm::controls_bytes;
using shm::group_page_bytes;
using shm::GroupPage;
using shm::kAckSlots;
using shm::read_directly;
using shm::Ring;
using shm::RingControl;

namespace {

// What precedes every message in a ring.
struct MessageHeader {
  int64_t tag;
  int64_t dtype;
  int64_t numel;
  int64_t bytes;
  uint64_t address;  // one copy: where the bytes are in the sender
  uint64_t ack;      // one copy: the message's number on its channel; 0: the bytes follow in the ring
};

}  // namespace

struct ShmProcess::Links::Op {
  at::Tensor tensor;
  int peer = 0;
  int64_t tag = 0;
  std::string what;
  bool done = false;
  std::string error;
  // A send's progress.
  bool header_written = false;
  uint64_t written = 0;
  uint64_t ack = 0;
};

struct ShmProcess::Links::Out {
  Ring ring;
  int world_peer = 0;
  bool one_copy = false;
  uint64_t acks_posted = 0;
  std::deque<std::shared_ptr<Op>> queue;     // header or bytes still to write, in order
  std::deque<std::shared_ptr<Op>> awaiting;  // one copy: waiting for the receiver's read
};

namespace {
// A message that arrived before its recv was posted.
struct Stash {
  MessageHeader header{};
  at::Tensor data;  // two copies: the bytes, taken out of the ring
  bool complete = false;
  std::shared_ptr<ShmProcess::Links::Op> claimed;  // a recv posted while the bytes were still coming
};
}  // namespace

struct ShmProcess::Links::In {
  Ring ring;
  int world_peer = 0;
  pid_t pid = 0;
  // The message being read.
  bool reading = false;
  MessageHeader header{};
  uint64_t received = 0;
  std::shared_ptr<Op> op;                                         // its recv, or
  std::shared_ptr<Stash> stash;                                   // where it waits for one
  bool drop = false;                                              // refused: its bytes are skipped
  std::map<int64_t, std::deque<std::shared_ptr<Op>>> posted;      // recvs waiting, by tag
  std::map<int64_t, std::deque<std::shared_ptr<Stash>>> arrived;  // messages waiting, by tag
};

namespace {

uint64_t segment_bytes(int members, const ShmSettings& s) {
  return group_page_bytes() + controls_bytes(members) + members * s.ring_bytes + s.arena_bytes;
}

bool fits(const ShmProcess::Links::Op& op, const MessageHeader& h) {
  return h.dtype == static_cast<int64_t>(op.tensor.scalar_type()) && h.numel == op.tensor.numel();
}

void refuse(ShmProcess::Links::Op& op, const MessageHeader& h) {
  op.error =
      misfit_text(op.what, op.peer, h.dtype, h.numel, static_cast<int64_t>(op.tensor.scalar_type()), op.tensor.numel());
}

std::string hash_of(const std::string& key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace

ShmProcess::Links::Links(std::shared_ptr<ShmProcess> process, c10d::Store& store, const std::string& key, int rank,
                         std::vector<int> world_ranks, std::vector<bool> here, Milliseconds timeout)
    : process_(std::move(process)),
      rank_(rank),
      world_ranks_(std::move(world_ranks)),
      here_(std::move(here)),
      timeout_(timeout),
      label_(" (" + key + " " + process_->token().substr(0, 4) + ")") {
  const int p = static_cast<int>(world_ranks_.size());
  const ShmSettings& s = process_->settings();
  const uint64_t bytes = segment_bytes(p, s);
  const std::string prefix = "distlab/shm/" + hash_of(key) + "/";
  mine_ = SharedSegment::create(segment_name(process_->token(), hash_of(key) + ".r" + std::to_string(rank_)), bytes);
  new (mine_.data()) GroupPage;
  auto* controls = reinterpret_cast<RingControl*>(static_cast<uint8_t*>(mine_.data()) + group_page_bytes());
  for (int i = 0; i < p; ++i) new (&controls[i]) RingControl;
  set_text(store, prefix + std::to_string(rank_), mine_.name());
  shm::reached("created");
  theirs_.resize(p);
  out_.resize(p);
  in_.resize(p);
  auto ring_of = [&](SharedSegment& segment, int writer) {
    auto* base = static_cast<uint8_t*>(segment.data());
    auto* control = reinterpret_cast<RingControl*>(base + group_page_bytes()) + writer;
    return Ring(control, base + group_page_bytes() + controls_bytes(p) + writer * s.ring_bytes, s.ring_bytes);
  };
  for (int m = 0; m < p; ++m) {
    if (m == rank_ || !here_[m]) continue;
    const int world = world_ranks_[m];
    const std::string name =
        process_->wait_for_peer(store, prefix + std::to_string(m), world, timeout, "set up its rings");
    theirs_[m] = SharedSegment::attach(name, bytes);
    out_[m] = std::make_unique<Out>();
    out_[m]->ring = ring_of(theirs_[m], rank_);
    out_[m]->world_peer = world;
    out_[m]->one_copy = process_->reads_me_directly(world);
    in_[m] = std::make_unique<In>();
    in_[m]->ring = ring_of(mine_, m);
    in_[m]->world_peer = world;
    in_[m]->pid = process_->pid_of(world);
    watched_.push_back(world);
  }
  set_text(store, prefix + "mapped/" + std::to_string(rank_), "1");
  for (int m = 0; m < p; ++m)
    if (m != rank_ && here_[m])
      process_->wait_for_peer(store, prefix + "mapped/" + std::to_string(m), world_ranks_[m], timeout,
                              "map this rank's rings");
  mine_.unlink();
  readable_ = all_here() && s.single_copy_from > 0;
  for (int a = 0; a < p && readable_; ++a)
    for (int b = 0; b < p; ++b)
      if (a != b && !process_->reads_directly(world_ranks_[a], world_ranks_[b])) readable_ = false;
  direct_ = readable_ && p <= s.direct_ranks;
  process_->add(this);
}

ShmProcess::Links::~Links() {
  // Sends nobody waited for still go out, as far as the peers take them.
  try {
    auto lock = process_->lock();
    process_->wait_locked(
        lock, [&] { return !sending_locked(); }, timeout_, watched_, "closing");
  } catch (const std::exception&) {
  }
  process_->remove(this);
}

bool ShmProcess::Links::all_here() const {
  return std::all_of(here_.begin(), here_.end(), [](bool b) { return b; });
}

void ShmProcess::Links::sending_to_locked(std::vector<int>& world_ranks) const {
  for (const auto& out : out_)
    if (out && (!out->queue.empty() || !out->awaiting.empty())) world_ranks.push_back(out->world_peer);
}

bool ShmProcess::Links::sending_locked() const {
  for (const auto& out : out_)
    if (out && (!out->queue.empty() || !out->awaiting.empty())) return true;
  return false;
}

bool ShmProcess::Links::pending_locked() const {
  if (sending_locked()) return true;
  for (const auto& in : in_)
    if (in && (in->reading || !in->posted.empty())) return true;
  return false;
}

namespace {
// The end of a one-copy message: its bytes read straight out of the sender
// into the recv's tensor (unless it was refused), the sender told through
// the acknowledgement slot, the recv done.
void finish_one_copy(ShmProcess& process, ShmProcess::Links::In& in, ShmProcess::Links::Op& op, const MessageHeader& h,
                     bool read) {
  if (read) {
    const std::string failed = read_directly(in.pid, op.tensor.data_ptr(), h.address, h.bytes);
    if (!failed.empty())
      op.error =
          op.what + ": reading rank " + std::to_string(in.world_peer) + "'s memory in one copy failed: " + failed;
  }
  in.ring.control()->acks[h.ack % kAckSlots].store(h.ack, std::memory_order_release);
  process.ring(in.world_peer);
  op.done = true;
}
}  // namespace

void ShmProcess::Links::sample(const Ring& ring, int rank, int from, int to) const {
  if (!recorder_ || !recorder_->enabled()) return;
  recorder_->counter(rank, "shm ring " + std::to_string(from) + "->" + std::to_string(to) + label_,
                     {{"head", static_cast<int64_t>(ring.control()->head.load(std::memory_order_acquire))},
                      {"tail", static_cast<int64_t>(ring.control()->tail.load(std::memory_order_acquire))},
                      {"capacity", static_cast<int64_t>(ring.capacity())}});
}

bool ShmProcess::Links::progress_locked() {
  const uint64_t one_copy_from = process_->settings().single_copy_from;
  const uint64_t chunk = std::max<uint64_t>(4096, process_->settings().ring_bytes / 8);
  const int me = world_ranks_[rank_];
  bool moved_any = false;
  for (auto& out_ptr : out_) {
    if (!out_ptr) continue;
    Out& out = *out_ptr;
    bool moved = false;
    auto complete_acked = [&](uint64_t ack) {
      for (auto it = out.awaiting.begin(); it != out.awaiting.end(); ++it)
        if ((*it)->ack == ack) {
          (*it)->done = true;
          (*it)->tensor = at::Tensor();
          out.awaiting.erase(it);
          moved = true;
          return;
        }
    };
    for (auto it = out.awaiting.begin(); it != out.awaiting.end();) {
      if (out.ring.control()->acks[(*it)->ack % kAckSlots].load(std::memory_order_acquire) == (*it)->ack) {
        (*it)->done = true;
        (*it)->tensor = at::Tensor();
        it = out.awaiting.erase(it);
        moved = true;
      } else {
        ++it;
      }
    }
    while (!out.queue.empty()) {
      Op& op = *out.queue.front();
      const uint64_t bytes = bytes_of(op.tensor);
      if (!op.header_written) {
        const bool one = out.one_copy && one_copy_from > 0 && bytes >= one_copy_from;
        const uint64_t number = out.acks_posted + 1;
        if (one) {
          // Slot number % kAckSlots must hold the message kAckSlots before
          // this one: read, so its send is complete.
          const uint64_t before = number > kAckSlots ? number - kAckSlots : 0;
          if (out.ring.control()->acks[number % kAckSlots].load(std::memory_order_acquire) != before) break;
          if (before > 0) complete_acked(before);
        }
        if (out.ring.writable() < sizeof(MessageHeader)) break;
        const MessageHeader h{op.tag,
                              static_cast<int64_t>(op.tensor.scalar_type()),
                              op.tensor.numel(),
                              static_cast<int64_t>(bytes),
                              one ? reinterpret_cast<uint64_t>(op.tensor.data_ptr()) : 0,
                              one ? number : 0};
        out.ring.write(&h, sizeof h);
        sample(out.ring, me, me, out.world_peer);
        op.header_written = true;
        moved = true;
        if (one) {
          out.acks_posted = number;
          op.ack = number;
          out.awaiting.push_back(out.queue.front());
          out.queue.pop_front();
          continue;
        }
      }
      // In chunks, each published (and the peer rung) as soon as it is in:
      // the receiver copies one out while the next goes in.
      for (uint64_t n; (n = std::min({bytes - op.written, out.ring.writable(), chunk})) > 0;) {
        out.ring.write(bytes_at(op.tensor) + op.written, n);
        sample(out.ring, me, me, out.world_peer);
        op.written += n;
        moved = true;
        process_->ring(out.world_peer);
      }
      if (op.written < bytes) break;
      op.done = true;
      op.tensor = at::Tensor();  // the message is in the ring: the sender's tensor is free
      out.queue.pop_front();
    }
    if (moved) process_->ring(out.world_peer);
    moved_any = moved_any || moved;
  }

  for (auto& in_ptr : in_) {
    if (!in_ptr) continue;
    In& in = *in_ptr;
    bool moved = false;
    for (;;) {
      if (!in.reading) {
        if (in.ring.readable() < sizeof(MessageHeader)) break;
        in.ring.read(&in.header, sizeof in.header);
        sample(in.ring, me, in.world_peer, me);
        moved = true;
        in.reading = true;
        in.received = 0;
        in.op = nullptr;
        in.stash = nullptr;
        in.drop = false;
        auto posted = in.posted.find(in.header.tag);
        if (posted != in.posted.end()) {
          in.op = posted->second.front();
          posted->second.pop_front();
          if (posted->second.empty()) in.posted.erase(posted);
          if (!fits(*in.op, in.header)) {
            refuse(*in.op, in.header);
            in.drop = true;
          }
        } else {
          in.stash = std::make_shared<Stash>();
          in.stash->header = in.header;
          if (in.header.ack == 0) in.stash->data = at::empty({in.header.bytes}, at::kByte);
          in.arrived[in.header.tag].push_back(in.stash);
        }
        if (in.header.ack != 0) {  // one copy: nothing follows in the ring
          in.reading = false;
          if (!in.op) {
            in.stash->complete = true;  // read when its recv comes
            continue;
          }
          finish_one_copy(*process_, in, *in.op, in.header, /*read=*/!in.drop);
          continue;
        }
      }
      uint8_t* into = in.drop ? nullptr : in.op ? bytes_at(in.op->tensor) : bytes_at(in.stash->data);
      const uint64_t bytes = static_cast<uint64_t>(in.header.bytes);
      for (uint64_t n; (n = std::min({bytes - in.received, in.ring.readable(), chunk})) > 0;) {
        in.ring.read(into == nullptr ? nullptr : into + in.received, n);
        sample(in.ring, me, in.world_peer, me);
        in.received += n;
        moved = true;
        process_->ring(in.world_peer);  // room in its ring
      }
      if (in.received < bytes) break;
      in.reading = false;
      if (in.op) {
        in.op->done = true;
      } else {
        in.stash->complete = true;
        if (in.stash->claimed) {
          Op& op = *in.stash->claimed;
          if (bytes > 0) std::memcpy(op.tensor.data_ptr(), in.stash->data.data_ptr(), bytes);  // empty: no pointers
          op.done = true;
        }
      }
    }
    if (moved) process_->ring(in.world_peer);  // room in its ring
    moved_any = moved_any || moved;
  }
  return moved_any;
}

void ShmProcess::Links::post_recv_locked(const std::shared_ptr<Op>& op) {
  In& in = *in_[op->peer];
  auto arrived = in.arrived.find(op->tag);
  if (arrived == in.arrived.end()) {
    in.posted[op->tag].push_back(op);
    return;
  }
  std::shared_ptr<Stash> stash = arrived->second.front();
  arrived->second.pop_front();
  if (arrived->second.empty()) in.arrived.erase(arrived);
  const MessageHeader& h = stash->header;
  if (!fits(*op, h)) {
    refuse(*op, h);
    // Two copies: the bytes still coming are read into the stash, which
    // nobody claims.
    if (h.ack != 0)
      finish_one_copy(*process_, in, *op, h, /*read=*/false);
    else
      op->done = true;
    return;
  }
  if (h.ack != 0) {
    finish_one_copy(*process_, in, *op, h, /*read=*/true);
  } else if (stash->complete) {
    if (h.bytes > 0) std::memcpy(op->tensor.data_ptr(), stash->data.data_ptr(), h.bytes);  // an empty tensor has none
    op->done = true;
  } else {
    stash->claimed = op;
  }
}

namespace {
class ShmWork : public Work {
 public:
  ShmWork(ShmProcess::Links* links, std::shared_ptr<ShmProcess::Links::Op> op, Milliseconds timeout)
      : links_(links), op_(std::move(op)), timeout_(timeout) {}
  void wait() override { wait_up_to(timeout_); }
  void wait_up_to(Milliseconds limit) override { links_->wait(op_, limit); }
  bool is_completed() override { return links_->done(op_); }

 private:
  ShmProcess::Links* links_;
  std::shared_ptr<ShmProcess::Links::Op> op_;
  Milliseconds timeout_;
};
}  // namespace

WorkPtr ShmProcess::Links::isend(const at::Tensor& tensor, int peer, int tag, std::string what) {
  return post(tensor, peer, tag, std::move(what),
              [&](const std::shared_ptr<Op>& op) { out_[peer]->queue.push_back(op); });
}

WorkPtr ShmProcess::Links::irecv(at::Tensor& tensor, int peer, int tag, std::string what) {
  return post(tensor, peer, tag, std::move(what), [&](const std::shared_ptr<Op>& op) { post_recv_locked(op); });
}

WorkPtr ShmProcess::Links::post(const at::Tensor& tensor, int peer, int tag, std::string what,
                                const std::function<void(const std::shared_ptr<Op>&)>& enqueue_locked) {
  auto op = std::make_shared<Op>();
  op->tensor = tensor;
  op->peer = peer;
  op->tag = tag;
  op->what = std::move(what);
  bool done = false;
  {
    auto lock = process_->lock();
    enqueue_locked(op);
    process_->progress_locked();
    done = op->done;
  }
  if (!done) process_->wake_background_.notify_one();  // it goes on while this rank does something else
  return std::make_shared<ShmWork>(this, op, timeout_);
}

bool ShmProcess::Links::done(const std::shared_ptr<Op>& op) {
  auto lock = process_->lock();
  if (!op->done) process_->progress_locked();
  return op->done;
}

void ShmProcess::Links::wait(const std::shared_ptr<Op>& op, Milliseconds limit) {
  auto lock = process_->lock();
  if (!process_->wait_locked(
          lock, [&] { return op->done; }, limit, {world_ranks_[op->peer]}, op->what))
    throw_timeout(op->what, limit, "");
  if (!op->error.empty()) {
    const std::string error = std::move(op->error);
    op->error.clear();
    throw CommError(error);
  }
}

}  // namespace distlab::comm
