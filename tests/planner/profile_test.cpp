// The profile's reader: what it writes it reads back; bad bytes are refused
// with one line naming what is wrong, never a crash.
#include <gtest/gtest.h>

#include <fstream>

#include "planner/profile.hpp"

namespace distlab::planner {
namespace {

Profile hand_profile() {
  Profile p;
  p.date = "2026-11-28";
  p.machine = "test";
  p.libtorch = "1.13.0";
  p.cores = 2;
  p.matmul = {{35, 128, 384, "fp32", 2e9}, {140, 128, 384, "fp32", 4e9}, {35, 128, 384, "bf16", 1e9}};
  p.elementwise_bytes_per_second = 5e9;
  p.op_seconds = 3e-6;
  p.links = {{"threads", "p2p", 2, {1e-5, 1e-9}}, {"threads", "all_reduce", 4, {4e-5, 3e-9}}};
  p.sharing = {{1, 1.0}, {2, 1.1}, {8, 4.2}};
  return p;
}

// The reader's message for `text`, or "" when it reads it.
std::string refusal(const std::string& text) {
  try {
    (void)parse_profile(text, "profile x.json");
  } catch (const ProfileError& e) {
    return e.what();
  }
  return "";
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(Profile, WhatItWritesItReadsBack) {
  const Profile p = hand_profile();
  const Profile q = parse_profile(profile_json(p), "x");
  EXPECT_EQ(q.machine, "test");
  EXPECT_EQ(q.cores, 2);
  ASSERT_EQ(q.matmul.size(), 3u);
  EXPECT_EQ(q.matmul[1].m, 140);
  EXPECT_DOUBLE_EQ(q.matmul[1].flops_per_second, 4e9);
  ASSERT_EQ(q.links.size(), 2u);
  EXPECT_DOUBLE_EQ(q.links[1].link.beta_s_per_byte, 3e-9);
  EXPECT_DOUBLE_EQ(q.slowdown(8), 4.2);
}

TEST(Profile, LooksUpByShapeGroupAndRanks) {
  const Profile p = hand_profile();
  EXPECT_DOUBLE_EQ(p.matmul_flops(35, 128, 384, "fp32"), 2e9);
  EXPECT_DOUBLE_EQ(p.matmul_flops(10, 128, 384, "fp32"), 2e9);    // below the smallest: the smallest's
  EXPECT_NEAR(p.matmul_flops(70, 128, 384, "fp32"), 3e9, 1e-3);   // halfway in log m: halfway
  EXPECT_DOUBLE_EQ(p.matmul_flops(35, 128, 384, "bf16"), 1e9);
  EXPECT_THROW(p.matmul_flops(35, 128, 384, "fp16"), ProfileError);
  EXPECT_DOUBLE_EQ(p.link("threads", "all_reduce", 8).alpha_s, 4e-5);  // the nearest group measured
  EXPECT_THROW(p.link("gloo", "p2p", 2), ProfileError);
  EXPECT_NEAR(p.slowdown(5), 1.1 + (5.0 - 2) / 6 * 3.1, 1e-12);
}

TEST(Profile, RefusesBadBytesInOneLineNamingWhatIsWrong) {
  const std::string good = profile_json(hand_profile());
  ASSERT_EQ(refusal(good), "");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good.substr(0, good.size() / 2), "not JSON"},
      {"[1, 2]", "not a profile"},
      {replaced(good, "distlab-profile", "other"), "not a DistLab profile"},
      {replaced(good, "\"version\": 1", "\"version\": 2"), "profile version 2, this distlab-plan reads version 1"},
      {replaced(good, "\"cores\": 2", "\"cores\": 0"), "\"cores\" in the profile is 0"},
      {replaced(good, "\"elementwise_bytes_per_second\"", "\"elementwise\""), "no \"elementwise_bytes_per_second\""},
      {replaced(good, "\"flops_per_second\": 4000000000.0", "\"flops_per_second\": -1"),
       "\"flops_per_second\" in matmul[1] is -1"},
      {replaced(good, "\"precision\": \"bf16\"", "\"precision\": \"int8\""), "\"precision\" in matmul[2] is \"int8\""},
      {replaced(good, "\"backend\": \"threads\"", "\"backend\": 3"), "\"backend\" in links[0] is not a string"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string why = refusal(text);
    EXPECT_NE(why.find("profile x.json: "), std::string::npos) << why;
    EXPECT_NE(why.find(expected), std::string::npos) << "expected '" << expected << "' in: " << why;
    EXPECT_EQ(why.find('\n'), std::string::npos) << "one line: " << why;
  }
}

TEST(Profile, AMissingFileSaysHowToMakeOne) {
  try {
    (void)read_profile("/nonexistent/profile.json");
    FAIL() << "read a missing file";
  } catch (const ProfileError& e) {
    EXPECT_NE(std::string(e.what()).find("distlab-plan calibrate"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace distlab::planner
