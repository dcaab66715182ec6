#include "image.hpp"

#include <stb_image.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace distlab::viz {

Color Image::at(int x, int y) const {
  x = std::clamp(x, 0, width - 1);
  y = std::clamp(y, 0, height - 1);
  const uint8_t* p = &rgba[(static_cast<size_t>(y) * width + x) * 4];
  return rgb(p[0], p[1], p[2]);
}

void write_png(const Image& image, const std::string& path) {
  if (image.width <= 0 || image.height <= 0) throw std::runtime_error("write_png: empty image for '" + path + "'");
  // A screenshot is flat colours: with no row filter and zlib level 4 stb
  // writes a 1600x900 frame in a third of the time of its defaults (every
  // filter tried per row, level 8), and the file comes out smaller. Writing
  // it is part of opening a trace with --screenshot (viz/README.md).
  stbi_write_force_png_filter = 0;
  stbi_write_png_compression_level = 4;
  if (stbi_write_png(path.c_str(), image.width, image.height, 4, image.rgba.data(), image.width * 4) == 0)
    throw std::runtime_error("cannot write PNG '" + path + "' (does its folder exist?)");
}

Image read_png(const std::string& path) {
  int w = 0;
  int h = 0;
  int channels = 0;
  stbi_uc* data = stbi_load(path.c_str(), &w, &h, &channels, 4);
  if (data == nullptr) throw std::runtime_error("cannot read PNG '" + path + "': " + stbi_failure_reason());
  Image image{w, h, std::vector<uint8_t>(data, data + static_cast<size_t>(w) * h * 4)};
  stbi_image_free(data);
  return image;
}

int color_distance(Color a, Color b) {
  return std::max({std::abs(red_of(a) - red_of(b)), std::abs(green_of(a) - green_of(b)),
                   std::abs(blue_of(a) - blue_of(b))});
}

}  // namespace distlab::viz
