// The same-host transport's process side (comm/shm_links.hpp): its Bell,
// its page and its probe of the other local ranks, the waits every
// transfer of the process makes, and the background thread.
#include "comm/shm_links.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "comm/peer_closed.hpp"
#include "comm/shm_internal.hpp"
#include "comm/store.hpp"

namespace distlab::comm {

using Clock = std::chrono::steady_clock;
using shm::Bell;
using shm::kCacheLine;
using shm::kMagic;
using shm::read_directly;

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

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (*end != '\0') throw SetupError(std::string(name) + " must be a whole number, got '" + text + "'");
  return value;
}

std::string size_text(uint64_t bytes) {
  return bytes % (1u << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

namespace {
std::atomic<int64_t> parts_all_reduces{0}, bytes_read{0};
}  // namespace

OneCopyCounts one_copy_counts() { return {parts_all_reduces.load(), bytes_read.load()}; }

void shm::count_parts_all_reduce() { parts_all_reduces.fetch_add(1, std::memory_order_relaxed); }

std::string shm::read_directly(pid_t pid, void* into, uint64_t address, uint64_t bytes) {
  uint64_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<uint8_t*>(into) + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(address + done), bytes - done};
    const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) return std::strerror(n < 0 ? errno : EIO);
    done += static_cast<uint64_t>(n);
  }
  bytes_read.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  return "";
}

ShmSettings ShmSettings::from_env() {
  ShmSettings s;
  s.ring_bytes = env_or("DISTLAB_SHM_RING_KB", s.ring_bytes >> 10) << 10;
  if (s.ring_bytes < 4096) throw SetupError("DISTLAB_SHM_RING_KB must be at least 4");
  s.arena_bytes = env_or("DISTLAB_SHM_ARENA_KB", s.arena_bytes >> 10) << 10;
  if (s.arena_bytes < 8192) throw SetupError("DISTLAB_SHM_ARENA_KB must be at least 8");
  const char* single = std::getenv("DISTLAB_SHM_SINGLE_COPY");
  if (single != nullptr && *single != '\0') {
    if (std::string(single) != "0" && std::string(single) != "1")
      throw SetupError(std::string("DISTLAB_SHM_SINGLE_COPY must be 0 (never) or 1 (from 64 KiB on), got '") + single +
                       "'");
    s.single_copy_from = single[0] == '0' ? 0 : 64u << 10;
  }
  s.spin = std::chrono::microseconds(env_or("DISTLAB_SHM_SPIN_US", s.spin.count()));
  s.direct_ranks = static_cast<int>(std::min<uint64_t>(env_or("DISTLAB_SHM_DIRECT_RANKS", s.direct_ranks), 1 << 20));
  return s;
}

namespace {
std::function<void(const std::string&)>& fault_point() {
  static std::function<void(const std::string&)> at;
  return at;
}
}  // namespace

void set_shm_fault_point(std::function<void(const std::string& point)> at) { fault_point() = std::move(at); }

void shm::reached(const char* point) {
  if (fault_point()) fault_point()(point);
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
  // A rank that dies here has published nothing: not even its pid, so the
  // others can only wait out their timeout for its page, naming it.
  shm::reached("page");
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
      wait_for_peer(store, "distlab/shm/ready/" + std::to_string(q), q, timeout, "map this rank's page");
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

pid_t ShmProcess::pid_of(int world_rank) const { return peers_.at(world_rank)->pid; }

bool ShmProcess::alive(int world_rank) const { return !(kill(pid_of(world_rank), 0) != 0 && errno == ESRCH); }

std::string ShmProcess::exited_text(int world_rank) const {
  return "rank " + std::to_string(world_rank) + " (process " + std::to_string(pid_of(world_rank)) +
         " on this host) has exited";
}

std::string ShmProcess::wait_for_peer(c10d::Store& store, const std::string& key, int world_rank, Milliseconds timeout,
                                      const std::string& doing) const {
  const std::string them =
      "rank " + std::to_string(world_rank_) + ": shared memory: rank " + std::to_string(world_rank);
  const pid_t pid = pid_of(world_rank);
  const auto deadline = Clock::now() + timeout;
  // A set-up takes milliseconds: the store is asked again after 50 us, then
  // twice as long each time, up to 5 ms.
  for (auto pause = std::chrono::microseconds(50);; pause = std::min(2 * pause, std::chrono::microseconds(5000))) {
    // Looked at before the store: what a rank set before it died is there.
    const bool gone = kill(pid, 0) != 0 && errno == ESRCH;
    try {
      if (store.check({key})) {
        const std::vector<uint8_t> value = store.get(key);
        return std::string(value.begin(), value.end());
      }
    } catch (const std::exception& e) {
      throw SetupError(them + " did not " + doing + ": the store failed (" + e.what() + ")");
    }
    if (gone)
      throw PeerClosed(them + " (process " + std::to_string(pid) + " on this host) has exited before it could " +
                       doing);
    if (Clock::now() >= deadline)
      throw SetupError(them + " did not " + doing + " within " + std::to_string(timeout.count()) + " ms");
    std::this_thread::sleep_for(pause);
  }
}

bool ShmProcess::reads_me_directly(int world_rank) const { return reads_directly(world_rank, world_rank_); }

bool ShmProcess::reads_directly(int reader, int target) const {
  return target < kProbedRanks && peers_.at(reader)->page->readable[target].load() != 0;
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
      for (int q : watched)
        if (!alive(q))
          throw PeerClosed(what + ": " + exited_text(q));
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

}  // namespace distlab::comm
