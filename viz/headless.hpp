// Rendering ImGui frames with no display at all: an EGL context on Mesa's
// surfaceless platform (no X server, no window), drawing into a framebuffer
// object that is read back into an Image.
//
// The screenshot mode, the render tests and the frame-time benchmark all
// render through this, with the same OpenGL3 backend the window uses.
#pragma once

#include <functional>

#include "image.hpp"

struct ImGuiContext;

namespace distlab::viz {

struct FrameTiming {
  double ui_ms = 0.0;      // building the frame: NewFrame .. Render (panels, layout, draw lists)
  double render_ms = 0.0;  // the OpenGL backend drawing it, to glFinish
  int draw_calls = 0;      // what the backend was given
  int vertices = 0;
  double total_ms() const { return ui_ms + render_ms; }
};

class HeadlessRenderer {
 public:
  // Creates the EGL context, the framebuffer and an ImGui context (made
  // current). Throws std::runtime_error saying which step failed and why.
  HeadlessRenderer(int width, int height);
  ~HeadlessRenderer();
  HeadlessRenderer(const HeadlessRenderer&) = delete;
  HeadlessRenderer& operator=(const HeadlessRenderer&) = delete;

  // Runs one frame: draw_ui() between ImGui::NewFrame and ImGui::Render, then
  // the backend renders it into the framebuffer. `dt` is the frame's
  // io.DeltaTime.
  FrameTiming frame(const std::function<void()>& draw_ui, float dt = 1.0f / 60.0f);
  // The framebuffer as it is now.
  Image read_pixels() const;
  int width() const { return width_; }
  int height() const { return height_; }

 private:
  void release();

  struct Egl;
  Egl* egl_ = nullptr;
  int width_;
  int height_;
  unsigned framebuffer_ = 0;
  unsigned color_buffer_ = 0;
  ImGuiContext* imgui_ = nullptr;
  bool backend_ready_ = false;
};

}  // namespace distlab::viz
