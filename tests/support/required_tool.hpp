// A test that needs a tool scripts/setup.sh installs (python3 with torch,
// torchtext, torchrun, mpirun) skips where the tool is missing, so a
// machine without them still runs everything else. Under CI (CI=true) the
// setup ran, so a missing tool means the setup or the machine is broken:
// the test fails instead of skipping past it.
//
//   DISTLAB_SKIP_OR_FAIL_WITHOUT(have_python_torch(), "python3 with torch is missing");
//
// GTEST_SKIP and FAIL return from the test body, hence a macro. The GPU
// tests do not use it: a CI machine without a GPU is normal.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace distlab::test_support {

inline bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::strcmp(ci, "true") == 0;
}

}  // namespace distlab::test_support

// Ends the test unless `available`: a failure under CI=true, else a skip;
// `reason` (one value a gtest message streams) says what is missing.
#define DISTLAB_SKIP_OR_FAIL_WITHOUT(available, reason)                                           \
  do {                                                                                            \
    if (!(available)) {                                                                           \
      if (::distlab::test_support::under_ci())                                                    \
        FAIL() << (reason) << " (CI=true: scripts/setup.sh installs it, so its absence fails)";   \
      GTEST_SKIP() << (reason);                                                                   \
    }                                                                                             \
  } while (false)
