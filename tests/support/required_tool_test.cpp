// required_tool.hpp: a missing tool skips the test, and under CI=true fails
// it, the reason in the message either way; a tool that is there lets the
// test go on.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "support/required_tool.hpp"

namespace distlab::test_support {
namespace {

// CI set to `value` (unset for nullopt) while it lives, then as it was.
class ScopedCi {
 public:
  explicit ScopedCi(const std::optional<std::string>& value) {
    if (const char* before = std::getenv("CI")) before_ = before;
    if (value)
      ::setenv("CI", value->c_str(), 1);
    else
      ::unsetenv("CI");
  }
  ~ScopedCi() {
    if (before_)
      ::setenv("CI", before_->c_str(), 1);
    else
      ::unsetenv("CI");
  }

 private:
  std::optional<std::string> before_;
};

bool went_on = false;

void needs(bool available) {
  went_on = false;
  DISTLAB_SKIP_OR_FAIL_WITHOUT(available, "frobnicate is not installed");
  went_on = true;
}

// What `needs(available)` reports under CI=`ci`, caught instead of reported.
std::vector<::testing::TestPartResult> results_of(bool available, const std::optional<std::string>& ci) {
  ScopedCi scoped(ci);
  ::testing::TestPartResultArray caught;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &caught);
    needs(available);
  }
  std::vector<::testing::TestPartResult> results;
  for (int i = 0; i < caught.size(); ++i) results.push_back(caught.GetTestPartResult(i));
  return results;
}

TEST(SkipOrFailWithout, MissingToolFailsUnderCi) {
  const auto results = results_of(false, "true");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].fatally_failed());
  EXPECT_NE(std::string(results[0].message()).find("frobnicate is not installed"),
            std::string::npos);
  EXPECT_FALSE(went_on);
}

TEST(SkipOrFailWithout, MissingToolSkipsOutsideCi) {
  for (const std::optional<std::string>& ci : {std::optional<std::string>(), std::optional<std::string>("false")}) {
    const auto results = results_of(false, ci);
    ASSERT_EQ(results.size(), 1u);
    EXPECT_TRUE(results[0].skipped());
    EXPECT_NE(std::string(results[0].message()).find("frobnicate is not installed"),
              std::string::npos);
    EXPECT_FALSE(went_on);
  }
}

TEST(SkipOrFailWithout, ToolThatIsThereGoesOn) {
  for (const std::optional<std::string>& ci : {std::optional<std::string>(), std::optional<std::string>("true")}) {
    EXPECT_TRUE(results_of(true, ci).empty());
    EXPECT_TRUE(went_on);
  }
}

}  // namespace
}  // namespace distlab::test_support
