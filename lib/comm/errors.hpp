// Errors of the comm layer. Each message names the rank that saw it, the
// operation, the peer it waited for, and a hint of the fix.
#pragma once

#include <stdexcept>
#include <string>

namespace distlab::comm {

class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A wait on another rank ran past the communicator's timeout.
class TimeoutError : public CommError {
 public:
  using CommError::CommError;
};

// This rank stopped because another rank failed first; the message carries
// that rank's error.
class JobAborted : public CommError {
 public:
  using CommError::CommError;
};

// Bad or inconsistent set-up: environment variables, world size, backend.
class SetupError : public CommError {
 public:
  using CommError::CommError;
};

// Rethrows `e` with `where` in front (and, for a plain CommError, `hint`
// after), keeping its type: a TimeoutError stays a TimeoutError and a
// JobAborted a JobAborted, which is how run_thread_ranks and run_job tell the
// rank that failed first from those that stopped because of it. `where`
// names the rank as Communicator::self() does, the job-wide rank first:
// "rank 3 (stage1 rank 1), pipeline action 1F0: ".
[[noreturn]] inline void rethrow_with_context(const std::string& where, const CommError& e,
                                              const std::string& hint = "") {
  if (dynamic_cast<const TimeoutError*>(&e)) throw TimeoutError(where + e.what());
  if (dynamic_cast<const JobAborted*>(&e)) throw JobAborted(where + e.what());
  if (dynamic_cast<const SetupError*>(&e)) throw SetupError(where + e.what());
  throw CommError(where + e.what() + hint);
}

}  // namespace distlab::comm
