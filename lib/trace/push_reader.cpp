#include "trace/push_reader.hpp"

#include <algorithm>
#include <cstring>

#include "trace/json_pull.hpp"

namespace distlab::trace {

ChromePushReader::ChromePushReader(const ReadLimits& limits, EventHandler on_event)
    : limits_(limits), reader_(std::make_unique<ChromeEventReader>(limits, std::move(on_event))) {}

ChromePushReader::~ChromePushReader() = default;

const TraceInfo& ChromePushReader::info() const { return reader_->info(); }

char* ChromePushReader::space(size_t n) {
  waiting_.resize(waiting_.size() - room_);  // room asked for before and not committed
  room_ = n;
  const size_t at = waiting_.size();
  waiting_.resize(at + n);
  return waiting_.data() + at;
}

void ChromePushReader::commit(size_t n) {
  // Of the room space() made, the first n bytes were written.
  waiting_.resize(waiting_.size() - room_ + std::min(n, room_));
  room_ = 0;
  if (failed() || state_ == State::kDone) return;
  if (bytes() > limits_.max_file_bytes) {
    failure_ = "the trace is larger than " + std::to_string(limits_.max_file_bytes) + " bytes";
    return;
  }
  if (waiting_.size() >= retry_at_) advance(false);
}

void ChromePushReader::push(const char* data, size_t n) {
  std::memcpy(space(n), data, n);
  commit(n);
}

bool ChromePushReader::finish() {
  if (!failed() && state_ != State::kDone) advance(true);
  if (!failed() && state_ != State::kDone) failure_ = "the trace ends early";
  return !failed();
}

// One step of stream_chrome's walk (reader.cpp), from the state it left.
void ChromePushReader::step(JsonPull& json) {
  switch (state_) {
    case State::kBegin: {
      json.skip_bom();
      const int first = json.peek();
      if (first == '[' || first == '{') {
        json.expect(static_cast<char>(first), "'[' or '{'");
        top_array_ = first == '[';
        state_ = top_array_ ? (json.accept(']') ? State::kEnd : State::kElement)
                            : (json.accept('}') ? State::kEnd : State::kKey);
      } else {
        throw TraceFormatError("not a Chrome trace: top level is neither an object nor an array");
      }
      return;
    }
    case State::kKey:
      json.read_key(key_);
      if (json.peek() == '[') {
        json.expect('[', "'['");
        state_ = json.accept(']') ? State::kAfterValue : State::kElement;
      } else {
        json.skip_value();
        state_ = State::kAfterValue;
      }
      return;
    case State::kElement:
      reader_->parse(json);
      reader_->deliver();
      state_ = State::kAfterElement;
      return;
    case State::kAfterElement:
      if (json.accept(',')) {
        state_ = State::kElement;
      } else {
        json.expect(']', "',' or ']' after an event");
        state_ = top_array_ ? State::kEnd : State::kAfterValue;
      }
      return;
    case State::kAfterValue:
      if (json.accept(',')) {
        state_ = State::kKey;
      } else {
        json.expect('}', "',' or '}' at the top level");
        state_ = State::kEnd;
      }
      return;
    case State::kEnd:
      json.expect_end();
      state_ = State::kDone;
      return;
    case State::kDone: return;
  }
}

void ChromePushReader::advance(bool last) {
  size_t done = 0;  // bytes of waiting_ consumed by finished steps
  try {
    ByteSource source(waiting_, offset_, last);
    JsonPull json(source);
    while (state_ != State::kDone) {
      step(json);
      done = static_cast<size_t>(source.offset() - offset_);
    }
  } catch (const NeedMoreBytes&) {
    // The step that ran out starts again when twice its bytes are here.
    retry_at_ = 2 * (waiting_.size() - done);
  } catch (const std::exception& e) {
    failure_ = "after " + std::to_string(reader_->info().events) + " events: " + e.what();
  }
  waiting_.erase(0, done);
  offset_ += static_cast<int64_t>(done);
}

}  // namespace distlab::trace
