#include "headless.hpp"

#define EGL_EGLEXT_PROTOTYPES
#include <EGL/egl.h>
#include <EGL/eglext.h>
#define GL_GLEXT_PROTOTYPES
#include <GL/gl.h>
#include <GL/glext.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

#include "colors.hpp"

namespace distlab::viz {

struct HeadlessRenderer::Egl {
  EGLDisplay display = EGL_NO_DISPLAY;
  EGLContext context = EGL_NO_CONTEXT;
};

namespace {

[[noreturn]] void fail(const std::string& what) {
  char code[16];
  std::snprintf(code, sizeof code, "0x%04x", eglGetError());
  throw std::runtime_error("headless rendering: " + what + " (EGL error " + code +
                           "). It needs Mesa's EGL (packages libegl-dev and libgl1-mesa-dri).");
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

HeadlessRenderer::HeadlessRenderer(int width, int height) : egl_(new Egl), width_(width), height_(height) {
  try {
    // Mesa's surfaceless platform: a GPU or llvmpipe context with no window
    // system at all, so this runs on CI machines without an X server.
    auto get_platform_display =
        reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(eglGetProcAddress("eglGetPlatformDisplayEXT"));
    if (get_platform_display == nullptr) fail("eglGetPlatformDisplayEXT is missing");
    egl_->display = get_platform_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
    if (egl_->display == EGL_NO_DISPLAY) fail("no surfaceless EGL display");
    EGLint major = 0;
    EGLint minor = 0;
    if (!eglInitialize(egl_->display, &major, &minor)) fail("eglInitialize failed");
    if (!eglBindAPI(EGL_OPENGL_API)) fail("desktop OpenGL is not available through EGL");
    const EGLint config_attributes[] = {EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT, EGL_SURFACE_TYPE, 0, EGL_NONE};
    EGLConfig config = nullptr;
    EGLint configs = 0;
    eglChooseConfig(egl_->display, config_attributes, &config, 1, &configs);
    const EGLint context_attributes[] = {EGL_CONTEXT_MAJOR_VERSION, 3, EGL_CONTEXT_MINOR_VERSION, 3,
                                         EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                                         EGL_NONE};
    egl_->context = eglCreateContext(egl_->display, configs > 0 ? config : EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT,
                                     context_attributes);
    if (egl_->context == EGL_NO_CONTEXT) fail("cannot create an OpenGL 3.3 core context");
    if (!eglMakeCurrent(egl_->display, EGL_NO_SURFACE, EGL_NO_SURFACE, egl_->context))
      fail("cannot make the context current without a surface");
  } catch (...) {
    release();
    throw;
  }

  // The frame goes into a colour renderbuffer instead of a window.
  glGenFramebuffers(1, &framebuffer_);
  glBindFramebuffer(GL_FRAMEBUFFER, framebuffer_);
  glGenRenderbuffers(1, &color_buffer_);
  glBindRenderbuffer(GL_RENDERBUFFER, color_buffer_);
  glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, width, height);
  glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, color_buffer_);
  if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE) {
    release();
    throw std::runtime_error("headless rendering: the " + std::to_string(width) + "x" + std::to_string(height) +
                             " framebuffer is incomplete");
  }

  imgui_ = ImGui::CreateContext();
  ImGui::SetCurrentContext(imgui_);
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // a screenshot depends on its flags only, not on a saved layout
  io.DisplaySize = ImVec2(static_cast<float>(width), static_cast<float>(height));
  backend_ready_ = ImGui_ImplOpenGL3_Init("#version 330 core");
  if (!backend_ready_) {
    release();
    throw std::runtime_error("headless rendering: the ImGui OpenGL3 backend failed to start");
  }
}

HeadlessRenderer::~HeadlessRenderer() { release(); }

void HeadlessRenderer::release() {
  if (imgui_ != nullptr) {
    ImGui::SetCurrentContext(imgui_);
    if (backend_ready_) ImGui_ImplOpenGL3_Shutdown();
    ImGui::DestroyContext(imgui_);
    imgui_ = nullptr;
  }
  if (egl_ == nullptr) return;
  if (egl_->context != EGL_NO_CONTEXT) {
    if (framebuffer_ != 0) glDeleteFramebuffers(1, &framebuffer_);
    if (color_buffer_ != 0) glDeleteRenderbuffers(1, &color_buffer_);
    eglMakeCurrent(egl_->display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    eglDestroyContext(egl_->display, egl_->context);
  }
  // No eglTerminate: the surfaceless display is one per process, and
  // terminating it would pull the context from under another renderer.
  delete egl_;
  egl_ = nullptr;
}

FrameTiming HeadlessRenderer::frame(const std::function<void()>& draw_ui, float dt) {
  ImGui::SetCurrentContext(imgui_);
  eglMakeCurrent(egl_->display, EGL_NO_SURFACE, EGL_NO_SURFACE, egl_->context);
  FrameTiming timing;
  const auto start = std::chrono::steady_clock::now();
  ImGuiIO& io = ImGui::GetIO();
  io.DisplaySize = ImVec2(static_cast<float>(width_), static_cast<float>(height_));
  io.DeltaTime = dt;
  ImGui_ImplOpenGL3_NewFrame();
  ImGui::NewFrame();
  draw_ui();
  ImGui::Render();
  timing.ui_ms = ms_since(start);
  const ImDrawData* data = ImGui::GetDrawData();
  timing.vertices = data->TotalVtxCount;
  for (int i = 0; i < data->CmdListsCount; ++i) timing.draw_calls += data->CmdLists[i]->CmdBuffer.Size;

  const auto render_start = std::chrono::steady_clock::now();
  glBindFramebuffer(GL_FRAMEBUFFER, framebuffer_);
  glViewport(0, 0, width_, height_);
  glClearColor(red_of(kCanvasColor) / 255.0f, green_of(kCanvasColor) / 255.0f, blue_of(kCanvasColor) / 255.0f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  glFinish();  // the time includes the rasterizing, not just queuing it
  timing.render_ms = ms_since(render_start);
  return timing;
}

Image HeadlessRenderer::read_pixels() const {
  Image image{width_, height_, std::vector<uint8_t>(static_cast<size_t>(width_) * height_ * 4)};
  glBindFramebuffer(GL_READ_FRAMEBUFFER, framebuffer_);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width_, height_, GL_RGBA, GL_UNSIGNED_BYTE, image.rgba.data());
  // OpenGL's row 0 is the bottom one.
  const size_t row = static_cast<size_t>(width_) * 4;
  std::vector<uint8_t> swap(row);
  for (int y = 0; y < height_ / 2; ++y) {
    uint8_t* a = &image.rgba[y * row];
    uint8_t* b = &image.rgba[(height_ - 1 - y) * row];
    std::memcpy(swap.data(), a, row);
    std::memcpy(a, b, row);
    std::memcpy(b, swap.data(), row);
  }
  return image;
}

}  // namespace distlab::viz
