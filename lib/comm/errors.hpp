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

}  // namespace distlab::comm
