// The interactive window: the ImGui GLFW + OpenGL3 example loop around App.
#pragma once

#include "app.hpp"

namespace distlab::viz {

// Returns the exit code: 0 when the window was closed, 1 when no window could
// be opened (no display: the message suggests --screenshot).
int run_window(App& app, const Options& options);

}  // namespace distlab::viz
