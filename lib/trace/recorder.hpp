// Where events go: a Recorder fans them out to its sinks.
//
// Recording is off until a sink is added. Then `enabled()` is one relaxed
// atomic load, and a Span that is not enabled stores nothing and formats
// nothing: instrumented code costs nothing measurable when tracing is off
// (bench/trace_overhead shows it).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "trace/clock.hpp"
#include "trace/event.hpp"

namespace distlab::trace {

class Sink {
 public:
  virtual ~Sink() = default;
  // Called under the recorder's lock: sinks need no locking of their own.
  virtual void write(const Event& event) = 0;
  virtual void flush() {}
};

class Recorder {
 public:
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  void add_sink(std::shared_ptr<Sink> sink);
  // Thread-safe: several ranks of the threads backend share one recorder.
  void record(const Event& event);
  // Records a counter sample taken now (trace::now_us()): the values of
  // `name`'s series on `rank`, e.g. counter(rank, "memory", {{"parameters",
  // bytes}, {"gradients", bytes}}). Nothing is built while disabled.
  void counter(int rank, const std::string& name, const CounterValues& values);
  void flush();

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<Sink>> sinks_;
  std::atomic<bool> enabled_{false};
};

// Keeps every event in memory, for tests and for in-process viewers.
class MemorySink : public Sink {
 public:
  void write(const Event& event) override;
  // A copy, safe to take while ranks are still recording.
  std::vector<Event> events() const;
  void clear();

 private:
  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

// Times a scope and records it as one event when the scope ends.
//
//   trace::Span span(recorder, rank, trace::kLaneComm, "send", "send");
//   span.set_peer(dst).set_bytes(n).arg("tag", tag);
//
// With a null or disabled recorder every call is a no-op.
class Span {
 public:
  Span(Recorder* recorder, int rank, const char* lane, const char* name, const char* category);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  bool active() const { return active_; }
  Span& set_peer(int peer) {
    if (active_) event_.peer = peer;
    return *this;
  }
  Span& set_bytes(int64_t bytes) {
    if (active_) event_.bytes = bytes;
    return *this;
  }
  Span& set_flow(uint64_t flow) {
    if (active_) event_.flow = flow;
    return *this;
  }
  Span& set_name(const std::string& name) {
    if (active_) event_.name = name;
    return *this;
  }
  template <typename T>
  Span& arg(const char* key, const T& value) {
    if (active_) event_.args.emplace_back(key, to_text(value));
    return *this;
  }
  // Records now instead of at the end of the scope.
  void finish();

 private:
  template <typename T>
  static std::string to_text(const T& value) {
    if constexpr (std::is_arithmetic_v<T>)
      return std::to_string(value);
    else
      return std::string(value);
  }

  Recorder* recorder_;
  bool active_;
  Event event_;
};

}  // namespace distlab::trace
