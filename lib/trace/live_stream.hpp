// The live stream: ranks send their events over TCP to a listener (the
// visualizer, or a test) while they run.
//
// Wire format, one JSON object per line (UTF-8, '\n'-terminated):
//   {"distlab_live":1}                        hello, once per connection
//   {"ph":"M","name":"clock_offset",...}      a rank's clock offset to rank 0
//                                             (multi-process jobs), before its events
//   {"ph":"X","pid":...,"args":{...}}         one event, as in the trace file
//   {"ph":"C","pid":...,"args":{...}}         one counter sample, likewise
// The receiver adds a connection's clock offset to the times of the events
// that follow, so every rank's events arrive in rank 0's clock.
// The listener binds to loopback unless told otherwise; anything that is not
// this format closes that connection with a message, and never grows memory
// past the line limit.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "trace/recorder.hpp"

namespace distlab::trace {

inline constexpr const char* kLiveHello = "{\"distlab_live\":1}";
inline constexpr size_t kLiveMaxLineBytes = 64 * 1024;

// "host:port" -> (host, port). Throws std::invalid_argument with the text.
std::pair<std::string, int> parse_host_port(const std::string& address);

// Sends events to a listener from a background thread, so a slow or absent
// listener never stalls a rank: when it cannot connect it says so once on
// stderr and drops events (counted in dropped()).
class LiveSink : public Sink {
 public:
  explicit LiveSink(const std::string& address, size_t max_queue = 1 << 20);
  ~LiveSink() override;
  void write(const Event& event) override;
  // Sends `rank`'s clock offset; call it before the first event.
  void write_clock_offset(int rank, const ClockOffset& offset);
  // Blocks until every queued event has been written to the socket (or the
  // connection failed). Returns the number of events ever dropped.
  void flush() override;
  uint64_t dropped() const { return dropped_.load(); }

 private:
  void run();
  void queue_line(std::string line);

  std::string host_;
  int port_;
  size_t max_queue_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool stopping_ = false;
  bool broken_ = false;
  size_t in_flight_ = 0;
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;
};

// One sender's bytes, cut into lines and read: the hello first, then clock
// offsets and events (moved into rank 0's clock by the sender's offset).
// LiveReceiver keeps one per connection; the browser build of the
// visualizer one per stream its server relays (viz/web/).
class LiveLineDecoder {
 public:
  struct Result {
    std::vector<Event> events;
    std::vector<std::pair<int, ClockOffset>> offsets;  // announced in these bytes
    std::string problem;  // not empty: the sender broke the format; drop it (later bytes are ignored)
  };
  // Appends the bytes and reads every whole line among them.
  Result feed(const char* data, size_t size);

 private:
  std::string buffer_;
  bool greeted_ = false;
  bool failed_ = false;
  std::map<int, int64_t> offsets_;  // rank -> its clock's offset to rank 0, from the sender's metadata
};

// Accepts any number of senders and collects their events.
class LiveReceiver {
 public:
  // bind_host "127.0.0.1" keeps it on loopback; port 0 picks a free port.
  explicit LiveReceiver(int port = 0, const std::string& bind_host = "127.0.0.1");
  ~LiveReceiver();
  LiveReceiver(const LiveReceiver&) = delete;
  LiveReceiver& operator=(const LiveReceiver&) = delete;

  int port() const { return port_; }
  // Events received since the last call, in arrival order per connection.
  std::vector<Event> drain();
  // Problems seen (bad hello, malformed line, oversized line), newest last.
  std::vector<std::string> errors() const;
  // Waits until at least `count` events arrived in total or `timeout_ms`
  // passed; returns the total received so far.
  uint64_t wait_for(uint64_t count, int timeout_ms);
  uint64_t total() const { return total_.load(); }
  // The clock offsets senders announced, by rank (already applied to their events).
  std::map<int, ClockOffset> clock_offsets() const;

 private:
  void run();

  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  int port_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Event> pending_;
  std::vector<std::string> errors_;
  std::map<int, ClockOffset> offsets_;
  std::atomic<uint64_t> total_{0};
  std::thread thread_;
};

}  // namespace distlab::trace
