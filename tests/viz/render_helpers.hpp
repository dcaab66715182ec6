// Rendering a panel headless in tests, and looking at the pixels.
#pragma once

#include <functional>
#include <string>

#include "colors.hpp"
#include "headless.hpp"
#include "image.hpp"

namespace distlab::viz::testing_util {

// Draws `panel` in a window covering the whole frame, `frames` times (ImGui
// settles layouts over a couple of frames), and returns the last frame.
Image render_in_window(HeadlessRenderer& renderer, const std::function<void()>& panel, int frames = 3);

// True when a pixel within `radius` of (x, y) is within `tolerance` of `want`
// on every channel. `what` is filled with what was found at (x, y).
bool has_color_near(const Image& image, float x, float y, Color want, int tolerance, int radius, std::string* what);

std::string describe(Color c);

}  // namespace distlab::viz::testing_util

// gtest assertion: EXPECT_TRUE(COLOR_AT(image, x, y, color, tolerance, radius)).
#define COLOR_AT(image, x, y, want, tolerance, radius)                                                          \
  ([&]() -> ::testing::AssertionResult {                                                                        \
    std::string found;                                                                                          \
    if (::distlab::viz::testing_util::has_color_near(image, x, y, want, tolerance, radius, &found))              \
      return ::testing::AssertionSuccess();                                                                     \
    return ::testing::AssertionFailure() << "at (" << (x) << ", " << (y) << ") wanted "                          \
                                         << ::distlab::viz::testing_util::describe(want) << ", found " << found; \
  }())
