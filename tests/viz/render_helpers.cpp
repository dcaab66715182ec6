#include "render_helpers.hpp"

#include <imgui.h>

#include <cmath>
#include <cstdio>



namespace distlab::viz::testing_util {

Image render_in_window(HeadlessRenderer& renderer, const std::function<void()>& panel, int frames) {
  for (int i = 0; i < frames; ++i) {
    renderer.frame([&] {
      ImGui::SetNextWindowPos(ImVec2(0, 0));
      ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
      ImGui::Begin("test", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBackground);
      panel();
      ImGui::End();
    });
  }
  return renderer.read_pixels();
}

std::string describe(Color c) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rgb(%d, %d, %d)", red_of(c), green_of(c), blue_of(c));
  return buf;
}

bool has_color_near(const Image& image, float x, float y, Color want, int tolerance, int radius, std::string* what) {
  const int cx = static_cast<int>(std::floor(x));
  const int cy = static_cast<int>(std::floor(y));
  *what = describe(image.at(cx, cy));
  for (int dy = -radius; dy <= radius; ++dy)
    for (int dx = -radius; dx <= radius; ++dx)
      if (color_distance(image.at(cx + dx, cy + dy), want) <= tolerance) return true;
  return false;
}

}  // namespace distlab::viz::testing_util
