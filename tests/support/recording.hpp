// Thread ranks whose trace events a test reads back: a recorder with one
// in-memory sink, put into the options run_thread_ranks takes.
//
//   comm::CommOptions options;
//   auto sink = test_support::record_into(options);
//   comm::run_thread_ranks(2, body, options);
//   for (const trace::Event& e : sink->events()) ...
#pragma once

#include <memory>

#include "comm/communicator.hpp"
#include "trace/recorder.hpp"

namespace distlab::test_support {

inline std::shared_ptr<trace::MemorySink> record_into(comm::CommOptions& options) {
  auto sink = std::make_shared<trace::MemorySink>();
  options.recorder = std::make_shared<trace::Recorder>();
  options.recorder->add_sink(sink);
  return sink;
}

}  // namespace distlab::test_support
