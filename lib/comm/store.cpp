#include "comm/store.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace distlab::comm {
namespace {

using Clock = std::chrono::steady_clock;

const char* const kAttemptKey = "distlab/attempt";

std::string first_line(const std::exception& e) {
  std::string why = e.what();
  return why.substr(0, why.find('\n'));
}

std::string ms(Milliseconds timeout) { return std::to_string(timeout.count()) + " ms"; }
std::string where(const WorldInfo& world) { return world.master_addr + ":" + std::to_string(world.master_port); }

c10::intrusive_ptr<c10d::Store> tcp_store(const WorldInfo& world, bool server, Milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(world.master_port);
  options.isServer = server;
  options.waitWorkers = false;  // join() counts the ranks, with a message naming the missing ones
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
}

// The outcome of a non-blocking connect under way: 0 or an errno.
int finish_connect(int fd, Milliseconds limit) {
  pollfd p{fd, POLLOUT, 0};
  if (poll(&p, 1, static_cast<int>(limit.count())) != 1) return ETIMEDOUT;
  int error = 0;
  socklen_t size = sizeof error;
  return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 ? error : errno;
}

// "" when something accepts a TCP connection at the master's address
// within `limit`, else why not ("Connection refused"). Asked before each
// TCPStore client is made: LibTorch logs every connect of its own that
// fails as an error line of its socket code, so a master that is not up
// yet would print a screen of them before this file's one message.
std::string probe_master(const WorldInfo& world, Milliseconds limit) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(world.master_port);
  if (const int error = getaddrinfo(world.master_addr.c_str(), port.c_str(), &hints, &found); error != 0)
    return gai_strerror(error);
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int error = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (error == EINPROGRESS) error = finish_connect(fd, limit);
    close(fd);
    if (error == 0) {
      freeaddrinfo(found);
      return "";
    }
    why = std::strerror(error);
  }
  freeaddrinfo(found);
  return why;
}

// Every rank sets its key, then waits for all the others' keys.
void join(c10d::Store& store, const WorldInfo& world, Milliseconds timeout) {
  store.set(joined_key(world.rank), std::vector<uint8_t>{1});
  std::vector<std::string> keys;
  for (int r = 0; r < world.world_size; ++r) keys.push_back(joined_key(r));
  try {
    store.wait(keys, timeout);
  } catch (const std::exception& e) {
    std::string missing;
    for (int r = 0; r < world.world_size; ++r)
      if (!store.check({joined_key(r)})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    throw SetupError("rank " + std::to_string(world.rank) + ": rank(s) " + (missing.empty() ? "?" : missing) +
                     " did not join at " + where(world) + " within " + ms(timeout) +
                     " (did every rank start? a slow start needs DISTLAB_CONNECT_TIMEOUT_MS): " + first_line(e));
  }
}

// torchrun's agent hosts the store: connect as a client, under this
// attempt's prefix.
c10::intrusive_ptr<c10d::Store> agent_store(const WorldInfo& world, Milliseconds timeout) {
  try {
    return c10::make_intrusive<c10d::PrefixStore>(world.store_prefix, tcp_store(world, false, timeout));
  } catch (const std::exception& e) {
    throw SetupError("rank " + std::to_string(world.rank) + ": cannot reach the launcher's store at " + where(world) +
                     " within " + ms(timeout) +
                     " (TORCHELASTIC_USE_AGENT_STORE=True says torchrun's agent hosts it; is the agent running, "
                     "and are MASTER_ADDR/MASTER_PORT right?): " + first_line(e));
  }
}

// Rank 0 hosts the store and writes its restart count in it.
c10::intrusive_ptr<c10d::Store> host_store(const WorldInfo& world, Milliseconds timeout) {
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = tcp_store(world, true, timeout);
  } catch (const std::exception& e) {
    throw SetupError("rank 0: cannot host the rendezvous at " + where(world) +
                     " (is the port free? under a launcher that hosts the store itself, it sets "
                     "TORCHELASTIC_USE_AGENT_STORE=True): " + first_line(e));
  }
  const std::string attempt = std::to_string(world.restart_count);
  store->set(kAttemptKey, std::vector<uint8_t>(attempt.begin(), attempt.end()));
  return store;
}

// Connects to rank 0's store. After a restart, rank 0 of the failed attempt
// may still be up for a moment (another node's launcher restarts its ranks
// on its own clock): a store of another attempt is left and tried again
// until `timeout`.
c10::intrusive_ptr<c10d::Store> reach_store(const WorldInfo& world, Milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const auto left = [&] { return std::chrono::duration_cast<Milliseconds>(deadline - Clock::now()); };
  const std::string mine = std::to_string(world.restart_count);
  std::string other_attempt, last_error;
  do {
    try {
      last_error = probe_master(world, std::min(left(), Milliseconds(1000)));
      if (last_error.empty()) {
        auto store = tcp_store(world, false, std::max(left(), Milliseconds(1)));
        const auto bytes = store->get(kAttemptKey);
        const std::string theirs(bytes.begin(), bytes.end());
        if (theirs == mine) return store;
        other_attempt = "rank 0 there is in attempt " + theirs + ", this rank in attempt " + mine;
      }
    } catch (const std::exception& e) {
      last_error = first_line(e);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (left() > Milliseconds(500));  // a shorter try would only time out
  throw SetupError("rank " + std::to_string(world.rank) + ": cannot reach the master at " + where(world) +
                   " within " + ms(timeout) + " (is rank 0 running, are MASTER_ADDR/MASTER_PORT right, and do all "
                   "launchers restart together?): " + (other_attempt.empty() ? last_error : other_attempt));
}

// One rendezvous per process and world: the first connection is kept for
// the life of the process (rank 0 keeps hosting), and every job run in it
// gets a prefix of its own. Hosting a new store on the same port for a
// second job would let a rank that is through with the first reach the old
// one, still up while rank 0 finishes, and take its keys for the new job's.
// Every rank runs the same jobs in the same order, so the k-th job of every
// rank meets under the same prefix.
struct Session {
  std::mutex mutex;
  c10::intrusive_ptr<c10d::Store> store;
  int jobs = 0;
};

Session& session_of(const WorldInfo& world) {
  static std::mutex mutex;
  // Never destroyed: a store still hosted when the process exits is closed
  // by the exit, not by a destructor racing the server thread.
  static auto* sessions = new std::map<std::string, std::unique_ptr<Session>>();
  const std::string key = where(world) + " rank " + std::to_string(world.rank) + " of " +
                          std::to_string(world.world_size) + " " + world.store_prefix;
  std::lock_guard<std::mutex> lock(mutex);
  auto& session = (*sessions)[key];
  if (!session) session = std::make_unique<Session>();
  return *session;
}

}  // namespace

std::string joined_key(int rank) { return "distlab/joined/" + std::to_string(rank); }

void set_text(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string wait_text(c10d::Store& store, const std::string& key, Milliseconds timeout, const std::string& failure) {
  try {
    store.wait({key}, timeout);
    const std::vector<uint8_t> value = store.get(key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception&) {
    throw SetupError(failure + " within " + std::to_string(timeout.count()) + " ms");
  }
}

c10::intrusive_ptr<c10d::Store> connect_store(const WorldInfo& world, Milliseconds timeout) {
  Session& session = session_of(world);
  std::lock_guard<std::mutex> lock(session.mutex);
  const auto started = Clock::now();
  if (!session.store)
    session.store = world.agent_store ? agent_store(world, timeout)
                    : world.rank == 0 ? host_store(world, timeout)
                                      : reach_store(world, timeout);
  const auto left = std::max(timeout - std::chrono::duration_cast<Milliseconds>(Clock::now() - started), Milliseconds(1));
  auto store = c10::make_intrusive<c10d::PrefixStore>("distlab/job" + std::to_string(session.jobs++), session.store);
  join(*store, world, left);
  return store;
}

}  // namespace distlab::comm
