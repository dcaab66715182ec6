#include "window.hpp"

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <cstdio>

#include "colors.hpp"
#include "controls.hpp"

namespace distlab::viz {
namespace {

void report_glfw_error(int code, const char* text) { std::fprintf(stderr, "distlab-viz: GLFW error %d: %s\n", code, text); }

}  // namespace

int run_window(App& app, const Options& options) {
  glfwSetErrorCallback(report_glfw_error);
  if (!glfwInit()) {
    std::fprintf(stderr,
                 "distlab-viz: cannot open a window (no display?). Render headless instead:\n"
                 "  distlab-viz ... --screenshot out.png\n");
    return 1;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  GLFWwindow* window = glfwCreateWindow(options.width, options.height, "DistLab", nullptr, nullptr);
  if (window == nullptr) {
    std::fprintf(stderr, "distlab-viz: cannot create an OpenGL 3.3 window\n");
    glfwTerminate();
    return 1;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(1);  // vsync: no point drawing faster than the screen

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  setup_imgui(options.scale);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");

  while (!glfwWindowShouldClose(window)) {
    glfwPollEvents();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    cap_frame_time();
    ImGui::NewFrame();
    app.frame();
    ImGui::Render();
    int width = 0;
    int height = 0;
    glfwGetFramebufferSize(window, &width, &height);
    glViewport(0, 0, width, height);
    glClearColor(red_of(kCanvasColor) / 255.0f, green_of(kCanvasColor) / 255.0f, blue_of(kCanvasColor) / 255.0f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    glfwSwapBuffers(window);
  }

  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return 0;
}

}  // namespace distlab::viz
