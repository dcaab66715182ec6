// Who called an operation: a stack of labels per thread.
//
// The layers that know what a message is for push a label for as long as
// they run; the flight recorder copies the stack into every operation
// recorded meanwhile on that thread:
//
//   flight::Site site("pipeline stage 1, F3");   // the executor
//   comm.isend(activation, next, tag);            // site "pipeline stage 1, F3"
//
// Nested labels join with " / " ("lesson 14 / ZeRO-3 unit 2 all-gather").
// A label costs a string copy at push; nothing is read unless an operation
// is recorded. Work handed to another thread (collectives/async.hpp) takes
// the submitter's labels with it.
#pragma once

#include <string>

namespace distlab::flight {

class Site {
 public:
  explicit Site(std::string label);
  ~Site();
  Site(const Site&) = delete;
  Site& operator=(const Site&) = delete;
};

// This thread's labels joined with " / "; "" when none.
std::string current_site();

}  // namespace distlab::flight
