// A peer closed its connection while this rank waited on it: that rank
// exited or crashed, so the cause is there, not in what the ranks called.
// Callers that would add a hint about mismatched calls leave it out.
// (Kept apart from errors.hpp, which nearly every file includes: only the
// backends that see a connection close and the callers that hint need it.)
#pragma once

#include "comm/errors.hpp"

namespace distlab::comm {

class PeerClosed : public CommError {
 public:
  using CommError::CommError;
};

}  // namespace distlab::comm
