// The streaming reader turned around: bytes are pushed in as they arrive
// (a browser's fetch hands a trace over a megabyte at a time) and every
// event complete so far is delivered at once, so reading overlaps the
// download instead of waiting for its end.
//
// It walks the same structure as stream_chrome (reader.hpp) with the same
// per-element reader, one step at a time: the top level, a key, an event,
// the comma after it. A step that runs past the bytes that have come
// (NeedMoreBytes) is undone and tried again when more have come; a step
// that cannot finish soon is not retried until the waiting bytes have
// doubled, so a huge value costs linear time, not quadratic.
//
// It is the fast path only. A file it cannot read whole (bad bytes, a cut,
// a top level that is no trace) makes it fail with the reason, having
// delivered some events; the caller forgets them and reads the file with
// stream_chrome and its recovery, which name the fault exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trace/reader.hpp"

namespace distlab::trace {

class ChromePushReader {
 public:
  ChromePushReader(const ReadLimits& limits, EventHandler on_event);
  ~ChromePushReader();
  ChromePushReader(const ChromePushReader&) = delete;
  ChromePushReader& operator=(const ChromePushReader&) = delete;

  // Room for the next `n` bytes; write them there (or fewer), then
  // commit(the bytes written): they are parsed as far as they complete an
  // event.
  char* space(size_t n);
  void commit(size_t n);
  // The same, copied from `data`.
  void push(const char* data, size_t n);
  // No more bytes: true when the whole input was a trace, read to its end;
  // false with failure() saying why otherwise.
  bool finish();

  bool failed() const { return !failure_.empty(); }
  const std::string& failure() const { return failure_; }
  const TraceInfo& info() const;
  int64_t bytes() const { return offset_ + static_cast<int64_t>(waiting_.size()); }

 private:
  enum class State { kBegin, kKey, kElement, kAfterElement, kAfterValue, kEnd, kDone };
  void advance(bool last);
  void step(class JsonPull& json);

  ReadLimits limits_;
  std::unique_ptr<ChromeEventReader> reader_;
  State state_ = State::kBegin;
  bool top_array_ = false;   // the events are the top-level array itself
  std::string waiting_;      // bytes not yet consumed by a finished step
  size_t room_ = 0;          // the last space() not yet committed
  int64_t offset_ = 0;       // their position in the input
  size_t retry_at_ = 0;      // a step that ran out waits for this many bytes
  std::string key_;          // scratch
  std::string failure_;
};

}  // namespace distlab::trace
