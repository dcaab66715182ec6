#include "comm/shm_links.hpp"

#include <ATen/ATen.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <new>

#include "comm/message_text.hpp"
#include "comm/peer_closed.hpp"
#include "comm/store.hpp"

namespace distlab::comm {

using Clock = std::chrono::steady_clock;
using shm::Bell;
using shm::kAckSlots;
using shm::kCacheLine;
using shm::Ring;
using shm::RingControl;

// ---------------------------------------------------------------- the Bell

void Bell::ring() {
  count.fetch_add(1);
  if (sleepers.load() != 0)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&count), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void Bell::sleep(uint32_t seen, std::chrono::microseconds limit) {
  sleepers.fetch_add(1);
  if (count.load() == seen) {
    timespec ts{static_cast<time_t>(limit.count() / 1000000), static_cast<long>(limit.count() % 1000000) * 1000};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&count), FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
  sleepers.fetch_sub(1);
}

namespace {

constexpr uint64_t kMagic = 0x64697374'6c616231;  // "distlab1"
// World ranks a process records its probe of (one byte each).
constexpr int kProbedRanks = 1024;
// What a peer reads out of this process to see whether one copy works.
volatile uint64_t probe_word = kMagic;

struct ProcessPage {
  uint64_t magic = kMagic;
  int64_t pid = 0;
  uint64_t probe_address = 0;
  std::atomic<uint8_t> readable[kProbedRanks];  // 1: this process read world rank i's memory
  alignas(kCacheLine) Bell bell;
};

struct GroupPage {
  uint64_t magic = kMagic;
  alignas(kCacheLine) std::atomic<uint64_t> arrived{0};  // the last barrier this rank reached
};

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (*end != '\0') throw SetupError(std::string(name) + " must be a whole number, got '" + text + "'");
  return value;
}

// Reads `bytes` at `address` in process `pid` into `into`; "" or why not.
std::string read_directly(pid_t pid, void* into, uint64_t address, uint64_t bytes) {
  uint64_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<uint8_t*>(into) + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(address + done), bytes - done};
    const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) return std::strerror(n < 0 ? errno : EIO);
    done += static_cast<uint64_t>(n);
  }
  return "";
}

std::string size_text(uint64_t bytes) {
  return bytes % (1u << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

ShmSettings ShmSettings::from_env() {
  ShmSettings s;
  s.ring_bytes = env_or("DISTLAB_SHM_RING_KB", s.ring_bytes >> 10) << 10;
  if (s.ring_bytes < 4096) throw SetupError("DISTLAB_SHM_RING_KB must be at least 4");
  const char* single = std::getenv("DISTLAB_SHM_SINGLE_COPY");
  if (single != nullptr && *single != '\0') {
    if (std::string(single) != "0" && std::string(single) != "1")
      throw SetupError(std::string("DISTLAB_SHM_SINGLE_COPY must be 0 (never) or 1 (from 64 KiB on), got '") + single +
                       "'");
    s.single_copy_from = single[0] == '0' ? 0 : 64u << 10;
  }
  s.spin = std::chrono::microseconds(env_or("DISTLAB_SHM_SPIN_US", s.spin.count()));
  return s;
}

// ------------------------------------------------------------ ShmProcess

struct ShmProcess::Peer {
  pid_t pid = 0;
  ProcessPage* page = nullptr;
};

ShmProcess::ShmProcess(c10d::Store& store, const std::string& token, int world_rank,
                       const std::vector<int>& local_world, ShmSettings settings, Milliseconds timeout)
    : token_(token), world_rank_(world_rank), settings_(settings), timeout_(timeout) {
  // Under Yama's ptrace_scope 1 a process may read another's memory only if
  // that one allows it; the probe below finds out whether it worked.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  remove_stale_segments();
  const std::string me = "rank " + std::to_string(world_rank);
  page_ = SharedSegment::create(segment_name(token, "r" + std::to_string(world_rank)), sizeof(ProcessPage));
  auto* page = new (page_.data()) ProcessPage;
  page->pid = getpid();
  page->probe_address = reinterpret_cast<uint64_t>(&probe_word);
  peers_[world_rank] = std::make_unique<Peer>(Peer{getpid(), page});
  set_text(store, "distlab/shm/page/" + std::to_string(world_rank), page_.name());
  for (int q : local_world) {
    if (q == world_rank) continue;
    const std::string name =
        wait_text(store, "distlab/shm/page/" + std::to_string(q), timeout,
                  me + ": shared memory: rank " + std::to_string(q) + " on this host did not set up");
    peer_pages_.push_back(SharedSegment::attach(name, sizeof(ProcessPage)));
    auto* theirs = static_cast<ProcessPage*>(peer_pages_.back().data());
    peers_[q] = std::make_unique<Peer>(Peer{static_cast<pid_t>(theirs->pid), theirs});
    uint64_t word = 0;
    const bool one_copy =
        settings_.single_copy_from > 0 && q < kProbedRanks &&
        read_directly(static_cast<pid_t>(theirs->pid), &word, theirs->probe_address, sizeof word).empty() &&
        word == kMagic;
    if (q < kProbedRanks) page->readable[q].store(one_copy ? 1 : 0);
  }
  set_text(store, "distlab/shm/ready/" + std::to_string(world_rank), "1");
  for (int q : local_world)
    if (q != world_rank)
      wait_text(store, "distlab/shm/ready/" + std::to_string(q), timeout,
                me + ": shared memory: rank " + std::to_string(q) + " on this host did not map this rank's page");
  page_.unlink();
  background_ = std::thread([this] { background(); });
}

ShmProcess::~ShmProcess() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_background_.notify_all();
  background_.join();
}

const ShmProcess::Peer& ShmProcess::peer(int world_rank) const { return *peers_.at(world_rank); }

bool ShmProcess::reads_me_directly(int world_rank) const {
  return world_rank_ < kProbedRanks && peers_.at(world_rank)->page->readable[world_rank_].load() != 0;
}

std::string ShmProcess::copy_mode() const {
  if (settings_.single_copy_from == 0) return "two copies through the ring (one copy turned off)";
  bool all = true;
  for (const auto& [rank, peer] : peers_)
    if (rank != world_rank_ && !reads_me_directly(rank)) all = false;
  if (!all) return "two copies through the ring (process_vm_readv refused between some ranks)";
  return "one copy (process_vm_readv) from " + size_text(settings_.single_copy_from) +
         ", two copies through the ring below";
}

void ShmProcess::ring(int world_rank) { peers_.at(world_rank)->page->bell.ring(); }
void ShmProcess::ring_self() { ring(world_rank_); }

void ShmProcess::settle() {
  auto lock = this->lock();
  std::vector<int> watched;  // the ranks this one still sends to
  for (Links* links : links_) links->sending_to_locked(watched);
  wait_locked(
      lock,
      [&] {
        for (Links* links : links_)
          if (links->sending_locked()) return false;
        return true;
      },
      timeout_, watched, "rank " + std::to_string(world_rank_) + ": settle");
}

void ShmProcess::add(Links* links) {
  std::lock_guard<std::mutex> lock(mutex_);
  links_.push_back(links);
}

void ShmProcess::remove(Links* links) {
  std::lock_guard<std::mutex> lock(mutex_);
  links_.erase(std::remove(links_.begin(), links_.end(), links), links_.end());
}

bool ShmProcess::progress_locked() {
  bool moved = false;
  for (Links* links : links_) moved = links->progress_locked() || moved;
  if (moved) ring_self();  // another thread of this process may wait for what moved
  return moved;
}

bool ShmProcess::wait_locked(std::unique_lock<std::mutex>& lock, const std::function<bool()>& done,
                             Milliseconds timeout, const std::vector<int>& watched, const std::string& what) {
  Bell& bell = peers_.at(world_rank_)->page->bell;
  const auto start = Clock::now(), deadline = start + timeout;
  auto checked = start;
  for (;;) {
    const uint32_t seen = bell.seen();
    progress_locked();
    if (done()) return true;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (now - checked > std::chrono::milliseconds(100)) {
      checked = now;
      for (int q : watched) {
        const pid_t pid = peers_.at(q)->pid;
        if (kill(pid, 0) != 0 && errno == ESRCH)
          throw PeerClosed(what + ": rank " + std::to_string(q) + " (process " + std::to_string(pid) +
                           " on this host) has exited");
      }
    }
    lock.unlock();
    if (now - start < settings_.spin)
      sched_yield();
    else
      bell.sleep(seen, std::min<std::chrono::microseconds>(
                           std::chrono::milliseconds(100),
                           std::chrono::duration_cast<std::chrono::microseconds>(deadline - now)));
    lock.lock();
  }
}

void ShmProcess::background() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    bool pending = false;
    for (Links* links : links_) pending = links->pending_locked() || pending;
    if (!pending) {
      wake_background_.wait_for(lock, std::chrono::milliseconds(50));
      continue;
    }
    progress_locked();
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lock.lock();
  }
}

// ------------------------------------------------------------------ Links

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

uint64_t bytes_of(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()) * t.element_size(); }
uint8_t* bytes_at(const at::Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

constexpr int64_t kAllToAllTag = -1;

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

uint64_t group_page_bytes() { return round_up(sizeof(GroupPage), kCacheLine); }
uint64_t controls_bytes(int members) { return round_up(members * sizeof(RingControl), kCacheLine); }
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
      timeout_(timeout) {
  const int p = static_cast<int>(world_ranks_.size());
  const ShmSettings& s = process_->settings();
  const uint64_t bytes = segment_bytes(p, s);
  const std::string me = "rank " + std::to_string(world_ranks_[rank_]);
  const std::string prefix = "distlab/shm/" + hash_of(key) + "/";
  mine_ = SharedSegment::create(segment_name(process_->token(), hash_of(key) + ".r" + std::to_string(rank_)), bytes);
  new (mine_.data()) GroupPage;
  auto* controls = reinterpret_cast<RingControl*>(static_cast<uint8_t*>(mine_.data()) + group_page_bytes());
  for (int i = 0; i < p; ++i) new (&controls[i]) RingControl;
  set_text(store, prefix + std::to_string(rank_), mine_.name());
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
        wait_text(store, prefix + std::to_string(m), timeout,
                  me + ": shared memory: rank " + std::to_string(world) + " did not set up its rings");
    theirs_[m] = SharedSegment::attach(name, bytes);
    out_[m] = std::make_unique<Out>();
    out_[m]->ring = ring_of(theirs_[m], rank_);
    out_[m]->world_peer = world;
    out_[m]->one_copy = process_->reads_me_directly(world);
    in_[m] = std::make_unique<In>();
    in_[m]->ring = ring_of(mine_, m);
    in_[m]->world_peer = world;
    in_[m]->pid = process_->peer(world).pid;
    watched_.push_back(world);
  }
  set_text(store, prefix + "mapped/" + std::to_string(rank_), "1");
  for (int m = 0; m < p; ++m)
    if (m != rank_ && here_[m])
      wait_text(store, prefix + "mapped/" + std::to_string(m), timeout,
                me + ": shared memory: rank " + std::to_string(world_ranks_[m]) + " did not map this rank's rings");
  mine_.unlink();
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

uint8_t* ShmProcess::Links::slot(int member, int half) const {
  const int p = static_cast<int>(world_ranks_.size());
  const ShmSettings& s = process_->settings();
  const SharedSegment& segment = member == rank_ ? mine_ : theirs_[member];
  return static_cast<uint8_t*>(segment.data()) + group_page_bytes() + controls_bytes(p) + p * s.ring_bytes +
         half * (s.arena_bytes / 2);
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

bool ShmProcess::Links::progress_locked() {
  const uint64_t one_copy_from = process_->settings().single_copy_from;
  const uint64_t chunk = std::max<uint64_t>(4096, process_->settings().ring_bytes / 8);
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
          std::memcpy(op.tensor.data_ptr(), in.stash->data.data_ptr(), bytes);
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
    std::memcpy(op->tensor.data_ptr(), stash->data.data_ptr(), h.bytes);
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

// ------------------------------------------------- collectives in the arena

void ShmProcess::Links::barrier(const std::string& what) {
  auto lock = process_->lock();
  const uint64_t g = ++generation_;
  auto page_of = [&](int m) { return static_cast<GroupPage*>(m == rank_ ? mine_.data() : theirs_[m].data()); };
  page_of(rank_)->arrived.store(g, std::memory_order_release);
  for (int q : watched_) process_->ring(q);
  const int p = static_cast<int>(world_ranks_.size());
  auto all_arrived = [&] {
    for (int m = 0; m < p; ++m)
      if (m != rank_ && page_of(m)->arrived.load(std::memory_order_acquire) < g) return false;
    return true;
  };
  if (process_->wait_locked(lock, all_arrived, timeout_, watched_, what)) return;
  std::string missing;
  for (int m = 0; m < p; ++m)
    if (m != rank_ && page_of(m)->arrived.load() < g)
      missing += (missing.empty() ? "rank " : ", rank ") + std::to_string(world_ranks_[m]);
  throw_timeout(what, timeout_, "Not there yet: " + missing);
}

namespace {
at::Tensor view_of(uint8_t* where, int64_t elements, at::ScalarType dtype) {
  return at::from_blob(where, {elements}, at::TensorOptions().dtype(dtype));
}
}  // namespace

void ShmProcess::Links::broadcast(at::Tensor& tensor, int root, const std::string& what) {
  const int64_t es = tensor.element_size(), n = tensor.numel();
  const int64_t per_chunk = static_cast<int64_t>(process_->settings().arena_bytes / 2) / es;
  uint8_t* data = bytes_at(tensor);
  for (int64_t start = 0; start < n; start += per_chunk) {
    const int64_t c = std::min(per_chunk, n - start);
    const int half = static_cast<int>(chunks_++ % 2);
    if (rank_ == root) std::memcpy(slot(root, half), data + start * es, c * es);
    barrier(what);
    if (rank_ != root) std::memcpy(data + start * es, slot(root, half), c * es);
  }
}

void ShmProcess::Links::reduce(at::Tensor& tensor, int root, ReduceOp op, const std::string& what) {
  reduce_in_arena(tensor, root, op, what);
}

void ShmProcess::Links::all_reduce(at::Tensor& tensor, ReduceOp op, const std::string& what) {
  reduce_in_arena(tensor, -1, op, what);
}

// Chunk by chunk: every rank copies its chunk into its slot; each reduces
// its share of the chunk over all slots, in rank order, into its own slot
// (in place, the reverted gloo design's reduce-scatter); then every rank (or
// the root alone) copies every share out. The halves of the arena alternate,
// so the next chunk goes in while the last one's shares are read, with two
// barriers a chunk.
void ShmProcess::Links::reduce_in_arena(at::Tensor& tensor, int root, ReduceOp op, const std::string& what) {
  const int p = static_cast<int>(world_ranks_.size());
  const at::ScalarType dtype = tensor.scalar_type();
  const int64_t es = tensor.element_size(), n = tensor.numel();
  const int64_t per_chunk = static_cast<int64_t>(process_->settings().arena_bytes / 2) / es;
  const bool keeps = root < 0 || rank_ == root;
  uint8_t* data = bytes_at(tensor);
  for (int64_t start = 0; start < n; start += per_chunk) {
    const int64_t c = std::min(per_chunk, n - start);
    const int half = static_cast<int>(chunks_++ % 2);
    std::memcpy(slot(rank_, half), data + start * es, c * es);
    barrier(what);
    const int64_t lo = c * rank_ / p, hi = c * (rank_ + 1) / p;
    if (hi > lo) {
      at::Tensor share = view_of(slot(0, half), c, dtype).slice(0, lo, hi).clone();
      for (int m = 1; m < p; ++m) combine_into(share, view_of(slot(m, half), c, dtype).slice(0, lo, hi), op);
      view_of(slot(rank_, half), c, dtype).slice(0, lo, hi).copy_(share);
    }
    barrier(what);
    if (!keeps) continue;
    for (int m = 0; m < p; ++m) {
      const int64_t from = c * m / p, to = c * (m + 1) / p;
      std::memcpy(data + (start + from) * es, slot(m, half) + from * es, (to - from) * es);
    }
  }
  if (keeps) finish_average(tensor, op, p);
}

void ShmProcess::Links::all_to_all(const at::Tensor& input, at::Tensor& output, const std::vector<int64_t>& send_counts,
                                   const std::vector<int64_t>& recv_counts, const std::string& what) {
  const int p = static_cast<int>(world_ranks_.size());
  std::vector<WorkPtr> pending;
  int64_t sent = 0, received = 0;
  std::vector<at::Tensor> ins(p);
  for (int m = 0; m < p; ++m) {
    at::Tensor out_block = input.slice(0, sent, sent + send_counts[m]);
    at::Tensor in_block = output.slice(0, received, received + recv_counts[m]);
    sent += send_counts[m];
    received += recv_counts[m];
    if (m == rank_) {
      in_block.copy_(out_block);
      continue;
    }
    const std::string step = what + " with rank " + std::to_string(world_ranks_[m]);
    pending.push_back(isend(out_block, m, static_cast<int>(kAllToAllTag), step));
    ins[m] = in_block;
    pending.push_back(irecv(ins[m], m, static_cast<int>(kAllToAllTag), step));
  }
  for (auto& w : pending) w->wait();
}

}  // namespace distlab::comm
