// The backend of the tests' multi-process workers: gloo's TCP unless the
// test that starts them asks for another (DISTLAB_TEST_BACKEND=auto runs the
// same checks over the same-host transport), so one worker serves both.
#pragma once

#include <cstdlib>
#include <string>

namespace distlab::testing {

inline std::string process_backend() {
  const char* backend = std::getenv("DISTLAB_TEST_BACKEND");
  return backend != nullptr && *backend != '\0' ? backend : "gloo";
}

// Sets an environment variable for as long as it lives (the launcher a test
// starts passes it on to the ranks), then restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace distlab::testing
