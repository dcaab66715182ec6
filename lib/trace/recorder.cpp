#include "trace/recorder.hpp"

namespace distlab::trace {

void Recorder::add_sink(std::shared_ptr<Sink> sink) {
  std::lock_guard<std::mutex> lock(mutex_);
  sinks_.push_back(std::move(sink));
  enabled_.store(true, std::memory_order_relaxed);
}

void Recorder::record(const Event& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& sink : sinks_) sink->write(event);
}

void Recorder::counter(int rank, const std::string& name, const CounterValues& values) {
  if (!enabled()) return;
  record(counter_event(rank, name, values, now_us()));
}

void Recorder::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& sink : sinks_) sink->flush();
}

void MemorySink::write(const Event& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(event);
}

std::vector<Event> MemorySink::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

void MemorySink::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.clear();
}

Span::Span(Recorder* recorder, int rank, const char* lane, const char* name, const char* category)
    : recorder_(recorder), active_(recorder != nullptr && recorder->enabled()) {
  if (!active_) return;
  event_.rank = rank;
  event_.lane = lane;
  event_.name = name;
  event_.category = category;
  event_.begin_us = now_us();
}

Span::~Span() { finish(); }

void Span::finish() {
  if (!active_) return;
  active_ = false;
  event_.end_us = now_us();
  recorder_->record(event_);
}

}  // namespace distlab::trace
