// A cut layer's calibration (cut_pieces.hpp): it measures every cut the
// enumeration makes on 2, 4 and 8 ranks (the enumerator's own layouts the
// reference), and on the tiny preset each cut, policy, size and world
// comes out measured, in the rank's own tokens, and is what the
// prediction then uses for such a layout.
#include <gtest/gtest.h>

#include <set>

#include "planner/cut_pieces.hpp"
#include "planner/enumerate.hpp"
#include "planner/step_time.hpp"

namespace distlab::planner {
namespace {

// The cuts of 2, 4 and 8 ranks: a world of 3, 5, 6 or 7 ranks adds its
// cuts up (step_time.hpp).
TEST(CutPieces, EveryCutTheEnumerationMakesOnPowersOfTwoIsMeasured) {
  for (const std::string preset : {"tiny", "cpu"}) {
    const ModelShape model = model_shape(preset, 1000);
    std::set<std::pair<int, int>> enumerated;
    for (const int world : {2, 4, 8}) {
      SearchSpace space;
      space.world = world;
      for (const Choice& c : enumerate(model, space).accepted)
        if (c.layout.tensor * c.layout.context > 1) enumerated.insert({c.layout.tensor, c.layout.context});
    }
    std::set<std::pair<int, int>> measured;
    for (const Cut cut : cuts_of(model, 8)) measured.insert({cut.tensor, cut.context});
    EXPECT_EQ(measured, enumerated) << preset;
  }
}

TEST(CutPieces, TheTinyPresetsCutsAreMeasuredAndUsed) {
  const ModelShape model = model_shape("tiny", 1000);
  Profile p;
  p.cores = 2;
  measure_cut_pieces(model, 4, p, [](const std::string&) {});
  for (const Cut cut : cuts_of(model, 4))
    for (const std::string policy : {"none", "full", "selective"}) {
      ASSERT_TRUE(p.has_cut("fp32", policy, cut)) << cut.tensor << " x " << cut.context << " " << policy;
      for (int world = cut.tensor * cut.context; world <= 4; world *= 2)
        EXPECT_EQ(p.cut_world("fp32", policy, cut, world), world);
    }
  for (const PiecePoint& q : p.pieces) {
    ASSERT_TRUE(q.cut());
    // The rank's own tokens: a context rank holds its chunks of every column.
    EXPECT_EQ(q.tokens % sequence_tokens(model, q.context), 0) << q.tokens;
    EXPECT_GT(q.forward_s, 0);
    EXPECT_GT(q.backward_s, 0);
    // I and W where the executor splits the backward (not a layer recomputed whole).
    EXPECT_EQ(q.weight_s > 0, q.recompute != "full") << q.recompute;
  }
  // 3 policies x 3 sizes per cut and world.
  size_t expected = 0;
  for (const Cut cut : cuts_of(model, 4))
    for (int world = cut.tensor * cut.context; world <= 4; world *= 2) expected += 9;
  EXPECT_EQ(p.pieces.size(), expected);
}

}  // namespace
}  // namespace distlab::planner
