#include "trace/live_stream.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>

#include "trace/chrome_json.hpp"
#include "trace/reader.hpp"

namespace distlab::trace {
namespace {

// Connects with a deadline, so an unreachable listener costs at most
// `timeout_ms` once instead of the kernel's minutes-long SYN retries.
int connect_with_timeout(const std::string& host, int port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) return -1;
  int fd = socket(found->ai_family, SOCK_STREAM, 0);
  if (fd < 0) {
    freeaddrinfo(found);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  int rc = connect(fd, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&p, 1, timeout_ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) rc = 0;
  }
  if (rc != 0) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::pair<std::string, int> parse_host_port(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    throw std::invalid_argument("expected HOST:PORT, got '" + address + "'");
  int port = 0;
  try {
    port = std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    port = -1;
  }
  if (port <= 0 || port > 65535) throw std::invalid_argument("bad port in '" + address + "' (expected 1-65535)");
  return {address.substr(0, colon), port};
}

// ---------------------------------------------------------------- LiveSink

LiveSink::LiveSink(const std::string& address, size_t max_queue) : max_queue_(max_queue) {
  std::tie(host_, port_) = parse_host_port(address);
  thread_ = std::thread([this] { run(); });
}

LiveSink::~LiveSink() {
  flush();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LiveSink::write(const Event& event) { queue_line(event_to_json(event, 0)); }

void LiveSink::write_clock_offset(int rank, const ClockOffset& offset) { queue_line(clock_offset_json(rank, offset)); }

void LiveSink::queue_line(std::string line) {
  line += '\n';
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_ || queue_.size() >= max_queue_) {
      dropped_.fetch_add(1);
      return;
    }
    queue_.push_back(std::move(line));
  }
  cv_.notify_all();
}

void LiveSink::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return broken_ || (queue_.empty() && in_flight_ == 0); });
}

void LiveSink::run() {
  int fd = connect_with_timeout(host_, port_, 2000);
  if (fd < 0 || !write_all(fd, std::string(kLiveHello) + "\n")) {
    std::fprintf(stderr, "distlab trace: no live listener at %s:%d; live events are dropped\n", host_.c_str(), port_);
    std::lock_guard<std::mutex> lock(mutex_);
    broken_ = true;
    dropped_.fetch_add(queue_.size());
    queue_.clear();
    cv_.notify_all();
    if (fd >= 0) close(fd);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty() && stopping_) break;
    // Take the whole queue at once: one syscall for many events.
    std::string batch;
    while (!queue_.empty()) {
      batch += queue_.front();
      queue_.pop_front();
      ++in_flight_;
    }
    size_t count = in_flight_;
    lock.unlock();
    bool ok = write_all(fd, batch);
    lock.lock();
    in_flight_ = 0;
    if (!ok) {
      std::fprintf(stderr, "distlab trace: live listener at %s:%d went away; live events are dropped\n",
                   host_.c_str(), port_);
      broken_ = true;
      dropped_.fetch_add(count + queue_.size());
      queue_.clear();
    }
    cv_.notify_all();
    if (broken_) break;
  }
  close(fd);
}

// ------------------------------------------------------------ LiveReceiver

LiveReceiver::LiveReceiver(int port, const std::string& bind_host) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) throw std::runtime_error("live receiver: socket() failed");
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, bind_host.c_str(), &addr.sin_addr) != 1) {
    close(listen_fd_);
    throw std::runtime_error("live receiver: bad bind address '" + bind_host + "' (expected an IPv4 address)");
  }
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listen_fd_, 64) != 0) {
    std::string why = std::strerror(errno);
    close(listen_fd_);
    throw std::runtime_error("live receiver: cannot listen on " + bind_host + ":" + std::to_string(port) + ": " + why);
  }
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (pipe(wake_pipe_) != 0) {
    close(listen_fd_);
    throw std::runtime_error("live receiver: pipe() failed");
  }
  thread_ = std::thread([this] { run(); });
}

LiveReceiver::~LiveReceiver() {
  char byte = 0;
  (void)!write(wake_pipe_[1], &byte, 1);
  thread_.join();
  close(listen_fd_);
  close(wake_pipe_[0]);
  close(wake_pipe_[1]);
}

std::vector<Event> LiveReceiver::drain() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Event> out;
  out.swap(pending_);
  return out;
}

std::map<int, ClockOffset> LiveReceiver::clock_offsets() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return offsets_;
}

std::vector<std::string> LiveReceiver::errors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return errors_;
}

uint64_t LiveReceiver::wait_for(uint64_t count, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return total_.load() >= count; });
  return total_.load();
}

LiveLineDecoder::Result LiveLineDecoder::feed(const char* data, size_t size) {
  Result result;
  if (failed_) return result;
  buffer_.append(data, size);
  size_t start = 0;
  for (size_t nl; (nl = buffer_.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = buffer_.substr(start, nl - start);
    if (!greeted_) {
      if (line != kLiveHello) {
        result.problem = "live receiver: a sender did not start with the DistLab hello; connection closed";
        break;
      }
      greeted_ = true;
      continue;
    }
    try {
      if (auto offset = parse_clock_offset_line(line)) {
        offsets_[offset->first] = offset->second.offset_us;
        result.offsets.push_back(*offset);
        continue;
      }
      Event e = parse_event_line(line);
      if (auto it = offsets_.find(e.rank); it != offsets_.end())  // into rank 0's clock, as a file's reader does
        apply_clock_offset(e, it->second);
      result.events.push_back(std::move(e));
    } catch (const std::exception& e) {  // TraceFormatError, or anything unforeseen: never fatal
      result.problem = std::string("live receiver: ") + e.what() + "; connection closed";
      break;
    }
  }
  if (result.problem.empty()) buffer_.erase(0, start);
  if (result.problem.empty() && buffer_.size() > kLiveMaxLineBytes)
    result.problem = "live receiver: a line longer than " + std::to_string(kLiveMaxLineBytes) + " bytes; connection closed";
  if (!result.problem.empty()) {
    failed_ = true;
    buffer_.clear();
  }
  return result;
}

void LiveReceiver::run() {
  std::map<int, LiveLineDecoder> connections;
  auto fail = [&](int fd, const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      errors_.push_back(why);
    }
    close(fd);
    connections.erase(fd);
  };
  while (true) {
    std::vector<pollfd> fds{{wake_pipe_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (auto& [fd, c] : connections) fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd >= 0) connections[fd] = LiveLineDecoder{};
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      int fd = fds[i].fd;
      char chunk[65536];
      ssize_t n = recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) {
        close(fd);
        connections.erase(fd);
        continue;
      }
      LiveLineDecoder::Result got = connections[fd].feed(chunk, static_cast<size_t>(n));
      if (!got.offsets.empty() || !got.events.empty()) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& [rank, offset] : got.offsets) offsets_[rank] = offset;
        total_.fetch_add(got.events.size());
        for (auto& e : got.events) pending_.push_back(std::move(e));
        cv_.notify_all();
      }
      if (!got.problem.empty()) fail(fd, got.problem);
    }
  }
  for (auto& [fd, c] : connections) close(fd);
}

}  // namespace distlab::trace
