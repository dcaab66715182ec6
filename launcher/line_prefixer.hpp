// Cuts one worker stream into whole lines and hands each on with the rank's
// prefix. The launcher writes each handed line with one write(), so lines of
// different workers never mix mid-line.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace distlab::launcher {

class LinePrefixer {
 public:
  using Sink = std::function<void(const std::string& line)>;  // line ends in '\n'

  // A line longer than this is handed on in pieces, so a worker printing
  // without newlines cannot make the launcher's buffer grow without end.
  static constexpr size_t kMaxLine = 64 * 1024;

  LinePrefixer(std::string prefix, Sink sink) : prefix_(std::move(prefix)), sink_(std::move(sink)) {}

  void feed(const char* data, size_t size);
  // At end of stream: the last line, when it had no '\n', gets one.
  void finish();

 private:
  void emit(size_t begin, size_t end);

  std::string prefix_;
  Sink sink_;
  std::string pending_;  // text after the last '\n' seen
};

// "[rank 3] ", or "" without prefixes.
std::string rank_prefix(int rank, bool enabled);

// Writes all of `text` to `fd` (a pipe or terminal); gives up silently when
// the reader is gone, since the launcher must keep managing its workers.
void write_all(int fd, const std::string& text);

}  // namespace distlab::launcher
