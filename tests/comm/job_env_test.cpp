// The job's flags against its environment: a flag the user typed wins over
// the variable, the variable fills what no flag set, a bad value is refused.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <vector>

#include "comm/job.hpp"
#include "comm/job_cli.hpp"

namespace distlab::comm {
namespace {

JobOptions parsed(std::vector<std::string> args) {
  JobOptions job;
  CLI::App app("job flags");
  add_job_flags(app, job);
  std::vector<const char*> argv{"prog"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return job;
}

// Sets a variable for one test, then restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? ::setenv(name_, old_.c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(JobEnv, TimeoutFlagWinsOverTheVariable) {
  const ScopedEnv env("DISTLAB_TIMEOUT_MS", "5000");
  EXPECT_EQ(with_env_defaults(parsed({"--timeout-ms", "700"})).timeout, Milliseconds(700));
  EXPECT_EQ(with_env_defaults(parsed({})).timeout, Milliseconds(5000)) << "no flag: the variable";
}

TEST(JobEnv, NeitherFlagNorVariableKeepsTheDefault) {
  ::unsetenv("DISTLAB_TIMEOUT_MS");
  EXPECT_EQ(with_env_defaults(parsed({})).timeout, kDefaultTimeout);
}

TEST(JobEnv, BadVariableIsRefusedWithItsName) {
  const ScopedEnv env("DISTLAB_TIMEOUT_MS", "soon");
  try {
    with_env_defaults(parsed({}));
    FAIL() << "accepted DISTLAB_TIMEOUT_MS=soon";
  } catch (const SetupError& e) {
    EXPECT_NE(std::string(e.what()).find("DISTLAB_TIMEOUT_MS must be a positive number of milliseconds, got 'soon'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace distlab::comm
