// The tests' free port (tests/support/free_port.hpp), in this suite's namespace.
#pragma once

#include "support/free_port.hpp"

namespace distlab::train::testing {

using test_support::free_port;

}  // namespace distlab::train::testing
