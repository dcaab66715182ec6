// A rendered frame: RGBA pixels, top row first, and PNG files of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "colors.hpp"

namespace distlab::viz {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgba;  // (height, width, 4), row 0 at the top

  // The pixel at (x, y), alpha forced to opaque; coordinates are clamped.
  Color at(int x, int y) const;
};

// Throws std::runtime_error naming the path.
void write_png(const Image& image, const std::string& path);
Image read_png(const std::string& path);

// The largest difference of one channel between two colours.
int color_distance(Color a, Color b);

}  // namespace distlab::viz
