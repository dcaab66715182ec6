// Each rank's share of the cores, and the variables that override it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "comm/errors.hpp"
#include "comm/intra_op_threads.hpp"

namespace distlab::comm {
namespace {

// Sets (or unsets) a variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(IntraOpThreads, CoresDividedAmongTheRanksOfThisMachine) {
  ScopedEnv a("DISTLAB_INTRA_OP_THREADS", std::nullopt), b("OMP_NUM_THREADS", std::nullopt);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(choose_intra_op_threads(1).threads, cores);
  EXPECT_EQ(choose_intra_op_threads(2).threads, std::max(1, cores / 2));
  EXPECT_EQ(choose_intra_op_threads(4 * cores).threads, 1);
  EXPECT_NE(choose_intra_op_threads(4).reason.find("4 rank(s)"), std::string::npos);
}

TEST(IntraOpThreads, VariablesOverrideAndBadValuesAreRefused) {
  ScopedEnv b("OMP_NUM_THREADS", "1");
  {
    ScopedEnv a("DISTLAB_INTRA_OP_THREADS", std::nullopt);
    EXPECT_EQ(choose_intra_op_threads(1).threads, 1);
    EXPECT_EQ(choose_intra_op_threads(1).reason, "OMP_NUM_THREADS=1");
  }
  {
    ScopedEnv a("DISTLAB_INTRA_OP_THREADS", "3");
    EXPECT_EQ(choose_intra_op_threads(8).threads, 3);
  }
  for (const char* bad : {"0", "-2", "two", ""}) {
    ScopedEnv a("DISTLAB_INTRA_OP_THREADS", std::string(bad));
    EXPECT_THROW(choose_intra_op_threads(1), SetupError) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace distlab::comm
