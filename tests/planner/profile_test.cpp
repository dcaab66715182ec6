// The profile's reader: what it writes it reads back; bad bytes are refused
// with one line naming what is wrong, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
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
  p.links = {{"threads", "p2p", 2, {1e-5, 1e-9}}, {"threads", "all_reduce", 4, {4e-5, 3e-9}},
             {"threads", "p2p", 2, {9e-5, 2e-9}, 8}};
  p.sharing = {{1, 1.0}, {2, 1.1}, {8, 4.2}};
  // A layer at 35, 70 and 350 tokens on one thread (its backward also
  // split into I and W), at 35 on two; a decoder.
  p.pieces = {{"layer", "fp32", "none", 1, 35, 1e-3, 2e-3, 0.8e-3, 1.7e-3},
              {"layer", "fp32", "none", 1, 70, 1.5e-3, 3e-3, 1.2e-3, 2.6e-3},
              {"layer", "fp32", "none", 1, 350, 5.5e-3, 11e-3, 4e-3, 9e-3},
              {"layer", "fp32", "none", 2, 35, 0.8e-3, 1.6e-3},
              {"decoder", "fp32", "none", 1, 35, 2e-3, 5e-3},   {"embedding", "fp32", "none", 1, 35, 1e-4, 1e-4},
              {"embedding", "fp32", "none", 1, 70, 1e-3, 1e-3}};
  p.updates = {{"layer", 1, 3e-4}, {"layer", 2, 2e-4}};
  p.pieces_model = "d 128, ffn 256";
  // A layer cut over 2 context ranks at 18 and 72 of its tokens, alone
  // and as 4 copies among 8 ranks.
  for (const auto& [world, scale] : {std::pair<int, double>{0, 1.0}, {8, 3.0}})
    for (const auto& [tokens, forward] : {std::pair<int64_t, double>{18, 2e-3}, {72, 4e-3}}) {
      PiecePoint q{"layer", "fp32", "none", 1, tokens, scale * forward, scale * 2 * forward,
                   scale * forward, scale * 1.5 * forward};
      q.context = 2;
      q.world = world;
      p.pieces.push_back(q);
    }
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
  ASSERT_EQ(q.links.size(), 3u);
  EXPECT_DOUBLE_EQ(q.links[1].link.beta_s_per_byte, 3e-9);
  EXPECT_EQ(q.links[1].world, 0);
  EXPECT_EQ(q.links[2].world, 8);
  EXPECT_DOUBLE_EQ(q.slowdown(8), 4.2);
  ASSERT_EQ(q.pieces.size(), 11u);
  EXPECT_EQ(q.pieces[7].context, 2);
  EXPECT_EQ(q.pieces[7].tensor, 1);
  EXPECT_EQ(q.pieces[7].world, 0);  // absent from the file: its own 2 ranks
  EXPECT_EQ(q.pieces[7].measured_world(), 2);
  EXPECT_EQ(q.pieces[10].world, 8);
  EXPECT_DOUBLE_EQ(q.pieces[10].forward_s, 12e-3);
  EXPECT_EQ(q.pieces[3].threads, 2);
  EXPECT_EQ(q.pieces[2].tokens, 350);
  EXPECT_DOUBLE_EQ(q.pieces[2].backward_s, 11e-3);
  EXPECT_DOUBLE_EQ(q.pieces[2].input_s, 4e-3);
  EXPECT_DOUBLE_EQ(q.pieces[2].weight_s, 9e-3);
  EXPECT_DOUBLE_EQ(q.pieces[3].weight_s, 0);  // not split: absent from the file
  ASSERT_EQ(q.updates.size(), 2u);
  EXPECT_DOUBLE_EQ(q.updates[1].seconds, 2e-4);
  EXPECT_EQ(q.pieces_model, "d 128, ffn 256");
  EXPECT_EQ(profile_json(q), profile_json(p));
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
  EXPECT_NEAR(p.slowdown(1.5), 1.05, 1e-12);  // ranks busy part of the time
  // Work in bf16 shares the cores by its own points; a precision not measured by fp32's.
  Profile q = p;
  q.sharing.push_back({1, 1.0, "bf16"});
  q.sharing.push_back({8, 6.0, "bf16"});
  EXPECT_NEAR(q.slowdown(4.5, "bf16"), 1.0 + 0.5 * 5.0, 1e-12);
  EXPECT_NEAR(q.slowdown(5, "fp32"), p.slowdown(5), 1e-12);
  EXPECT_NEAR(q.slowdown(5, "fp16"), p.slowdown(5), 1e-12);
  EXPECT_EQ(parse_profile(profile_json(q), "x").sharing.back().precision, "bf16");
  EXPECT_EQ(parse_profile(profile_json(q), "x").sharing.front().precision, "fp32");
  // Among 8 busy ranks: the point measured so; among 4: the group alone's (2) is nearer.
  EXPECT_DOUBLE_EQ(p.link("threads", "p2p", 2, 8).alpha_s, 9e-5);
  EXPECT_DOUBLE_EQ(p.link("threads", "p2p", 2, 4).alpha_s, 1e-5);
  EXPECT_DOUBLE_EQ(p.link("threads", "p2p", 2).alpha_s, 1e-5);
}

TEST(Profile, PiecesAreLinearInTheTokensBetweenAndPastTheMeasuredSizes) {
  const Profile p = hand_profile();
  auto forward = [&](double tokens, int threads = 1) {
    return p.piece_seconds("layer", "fp32", "none", threads, tokens).forward;
  };
  EXPECT_DOUBLE_EQ(forward(35), 1e-3);
  EXPECT_DOUBLE_EQ(forward(350), 5.5e-3);
  EXPECT_NEAR(forward(52.5), 1.25e-3, 1e-15);              // halfway between 35 and 70
  EXPECT_NEAR(forward(210), 1.5e-3 + 0.5 * 4e-3, 1e-15);   // halfway between 70 and 350
  EXPECT_NEAR(forward(700), 5.5e-3 + 4e-3 * 350 / 280, 1e-15);  // along the last two
  // Below the smallest: along the first two, never under the smallest's share a token.
  EXPECT_NEAR(forward(28), std::max(1e-3 - 0.5e-3 * 7 / 35, 1e-3 * 28 / 35), 1e-15);
  EXPECT_NEAR(forward(1), 1e-3 - 0.5e-3 * 34 / 35, 1e-15);  // a fixed part: above 1/35 of 35 tokens
  EXPECT_NEAR(p.piece_seconds("layer", "fp32", "none", 1, 52.5).backward, 2.5e-3, 1e-15);
  // I and W along the same segments: 210 tokens, halfway from 70 to 350.
  EXPECT_NEAR(p.piece_seconds("layer", "fp32", "none", 1, 210).input, 2.6e-3, 1e-15);
  EXPECT_NEAR(p.piece_seconds("layer", "fp32", "none", 1, 210).weight, 5.8e-3, 1e-15);
  EXPECT_EQ(p.piece_seconds("layer", "fp32", "none", 2, 35).weight, 0);  // two threads: not split
  // A steep first segment would go below 0 there: the smallest's share a token.
  EXPECT_NEAR(p.piece_seconds("embedding", "fp32", "none", 1, 28).forward, 1e-4 * 28 / 35, 1e-15);
  // The thread count measured nearest; one size measured: proportional.
  EXPECT_DOUBLE_EQ(forward(35, 2), 0.8e-3);
  EXPECT_DOUBLE_EQ(forward(70, 4), 1.6e-3);
  EXPECT_DOUBLE_EQ(p.piece_seconds("decoder", "fp32", "none", 1, 70).backward, 10e-3);
  EXPECT_THROW(p.piece_seconds("layer", "bf16", "none", 1, 35), ProfileError);
  EXPECT_THROW(p.piece_seconds("layer", "fp32", "full", 1, 35), ProfileError);
  EXPECT_TRUE(p.has_pieces("fp32", "none"));
  EXPECT_FALSE(p.has_pieces("fp32", "full"));
  EXPECT_FALSE(p.has_pieces("bf16", "none"));
  EXPECT_DOUBLE_EQ(p.update_seconds("layer", 1), 3e-4);
  EXPECT_DOUBLE_EQ(p.update_seconds("layer", 3), 2e-4);
  EXPECT_EQ(p.update_seconds("decoder", 1), 0);
}

TEST(Profile, ACutLayerIsLookedUpByItsCutAndTheNearestWorldMeasured) {
  const Profile p = hand_profile();
  const Cut context2{1, 2};
  EXPECT_TRUE(p.has_cut("fp32", "none", context2));
  EXPECT_FALSE(p.has_cut("fp32", "none", {2, 1}));
  EXPECT_FALSE(p.has_cut("fp32", "full", context2));
  // The largest world measured up to the one asked, else the smallest above.
  EXPECT_EQ(p.cut_world("fp32", "none", context2, 2), 2);
  EXPECT_EQ(p.cut_world("fp32", "none", context2, 4), 2);
  EXPECT_EQ(p.cut_world("fp32", "none", context2, 8), 8);
  EXPECT_EQ(p.cut_world("fp32", "none", context2, 16), 8);
  EXPECT_EQ(p.cut_world("fp32", "none", {2, 1}, 8), 0);
  // Linear in its own tokens between the sizes measured in that world: 45 halfway.
  EXPECT_NEAR(p.piece_seconds("layer", "fp32", "none", 1, 45, context2, 2).forward, 3e-3, 1e-15);
  EXPECT_NEAR(p.piece_seconds("layer", "fp32", "none", 1, 45, context2, 8).forward, 9e-3, 1e-15);
  EXPECT_NEAR(p.piece_seconds("layer", "fp32", "none", 1, 45, context2, 8).weight, 13.5e-3, 1e-15);
  // The whole layer is not the cut one, and the cut one does not count as the whole.
  EXPECT_DOUBLE_EQ(p.piece_seconds("layer", "fp32", "none", 1, 70).forward, 1.5e-3);
  Profile only_cut = p;
  only_cut.pieces.erase(only_cut.pieces.begin(), only_cut.pieces.begin() + 4);  // the whole layers
  EXPECT_FALSE(only_cut.has_pieces("fp32", "none"));
  try {
    (void)p.piece_seconds("layer", "fp32", "none", 1, 35, {4, 1}, 4);
    ADD_FAILURE() << "a cut never measured was looked up";
  } catch (const ProfileError& e) {
    EXPECT_NE(std::string(e.what()).find("cut over 4 tensor x 1 context ranks"), std::string::npos) << e.what();
  }
}

TEST(Profile, RefusesBadBytesInOneLineNamingWhatIsWrong) {
  const std::string good = profile_json(hand_profile());
  ASSERT_EQ(refusal(good), "");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good.substr(0, good.size() / 2), "not JSON"},
      {"[1, 2]", "not a profile"},
      {replaced(good, "distlab-profile", "other"), "not a DistLab profile"},
      {replaced(good, "\"version\": 2", "\"version\": 1"), "profile version 1, this distlab-plan reads version 2"},
      {replaced(good, "\"cores\": 2", "\"cores\": 0"), "\"cores\" in the profile is 0"},
      {replaced(good, "\"elementwise_bytes_per_second\"", "\"elementwise\""), "no \"elementwise_bytes_per_second\""},
      {replaced(good, "\"flops_per_second\": 4000000000.0", "\"flops_per_second\": -1"),
       "\"flops_per_second\" in matmul[1] is -1"},
      {replaced(good, "\"precision\": \"bf16\"", "\"precision\": \"int8\""), "\"precision\" in matmul[2] is \"int8\""},
      {replaced(good, "\"backend\": \"threads\"", "\"backend\": 3"), "\"backend\" in links[0] is not a string"},
      {replaced(good, "\"world\": 8", "\"world\": 1"), "\"world\" in links[2] is 1, fewer than its 2 ranks"},
      {replaced(good, "\"piece\": \"decoder\"", "\"piece\": \"head\""),
       "\"piece\" in pieces[4] is \"head\", not one of embedding, layer, decoder"},
      {replaced(good, "\"recompute\": \"none\"", "\"recompute\": \"most\""), "\"recompute\" in pieces[0] is \"most\""},
      {replaced(good, "\"tokens\": 70", "\"tokens\": 35"), "pieces[1] measures again what an earlier entry measured"},
      {replaced(good, "\"backward_s\": 0.011", "\"backward_s\": 0"), "\"backward_s\" in pieces[2] is 0"},
      {replaced(good, "\"weight_s\": 0.009", "\"weight_s\": 0"), "\"weight_s\" in pieces[2] is 0"},
      {replaced(good, "\"input_s\": 0.004", "\"input_s\": -1"), "\"input_s\" in pieces[2] is -1"},
      {replaced(good, "\"pieces\": [", "\"pieces\": 3, \"x\": ["), "\"pieces\" in the profile is not a list"},
      {replaced(good, "\"seconds\": 0.0003", "\"seconds\": \"fast\""), "\"seconds\" in updates[0] is not a number"},
      {replaced(good, "\"pieces_model\"", "\"model\""), "no \"pieces_model\" in the profile (whose pieces are they?)"},
      {replaced(good, "\"context\": 2", "\"context\": 0"), "\"context\" in pieces[7] is 0"},
      {replaced(good, "\"slowdown\": 1.1", "\"slowdown\": 1.1, \"precision\": \"int4\""),
       "\"precision\" in sharing[1] is \"int4\""},
      {replaced(good, "\"context\": 2", "\"context\": 2, \"tensor\": 1.5"), "\"tensor\" in pieces[7] is 1.5"},
      {replaced(good, "\"world\": 8\n  }\n ],\n \"pieces_model\"", "\"world\": 3\n  }\n ],\n \"pieces_model\""),
       "pieces[10] was measured among 3 ranks, not a multiple of its 2"},
      {replaced(good, "\"piece\": \"decoder\"", "\"piece\": \"decoder\", \"tensor\": 2"),
       "pieces[4] cuts a decoder: only a layer is cut"},
      {replaced(good, "\"tokens\": 72", "\"tokens\": 18"), "pieces[8] measures again what an earlier entry measured"},
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
