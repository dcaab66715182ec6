#include "colors.hpp"

#include <array>
#include <cstddef>
#include <functional>

namespace distlab::viz {
namespace {

// Sixteen hues far enough apart to tell chunks of a 16-rank ring apart, and
// bright enough to read on the dark canvas of a projector.
constexpr std::array<Color, 16> kPalette = {
    rgb(230, 25, 75),   rgb(60, 180, 75),   rgb(255, 160, 20),  rgb(0, 130, 200),
    rgb(245, 130, 48),  rgb(145, 30, 180),  rgb(70, 240, 240),  rgb(240, 50, 230),
    rgb(210, 245, 60),  rgb(250, 190, 212), rgb(0, 128, 128),   rgb(220, 190, 255),
    rgb(170, 110, 40),  rgb(255, 250, 200), rgb(128, 0, 0),     rgb(170, 255, 195),
};

}  // namespace

Color category_color(const std::string& category) {
  if (category == "fwd") return rgb(66, 165, 245);
  if (category == "bwd") return rgb(239, 108, 0);
  if (category == "send") return rgb(102, 187, 106);
  if (category == "recv") return rgb(171, 71, 188);
  if (category == "collective") return rgb(255, 202, 40);
  if (category == "step") return rgb(38, 166, 154);
  if (category == "bucket") return rgb(236, 64, 122);
  if (category == "optimizer") return rgb(141, 110, 99);
  return kPalette[std::hash<std::string>{}(category) % kPalette.size()];
}

Color chunk_color(int chunk) {
  if (chunk < 0) return rgb(90, 200, 250);
  return kPalette[static_cast<size_t>(chunk) % kPalette.size()];
}

Color mix(Color a, Color b, float t) {
  auto channel = [t](uint8_t x, uint8_t y) { return static_cast<uint8_t>(x + (y - x) * t + 0.5f); };
  return rgb(channel(red_of(a), red_of(b)), channel(green_of(a), green_of(b)), channel(blue_of(a), blue_of(b)));
}

}  // namespace distlab::viz
