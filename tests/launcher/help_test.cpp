// distlab-run --help: one usage line, the real one.
#include <gtest/gtest.h>

#include <sstream>

#include "options.hpp"

namespace distlab::launcher {
namespace {

TEST(Help, OneUsageLineThatNamesTheProgram) {
  std::ostringstream help;
  EXPECT_FALSE(parse_launch_options({"--help"}, help).has_value());
  const std::string text = help.str();
  size_t usages = 0;
  for (size_t at = text.find("Usage:"); at != std::string::npos; at = text.find("Usage:", at + 1)) ++usages;
  EXPECT_EQ(usages, 1u) << text;
  EXPECT_NE(text.find("Usage: distlab-run [flags] [--] program [args...]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("--nproc-per-node"), std::string::npos) << text;
}

}  // namespace
}  // namespace distlab::launcher
