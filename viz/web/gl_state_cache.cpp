// glGetIntegerv for Dear ImGui's OpenGL backend in the browser (see
// CMakeLists.txt: the backend's calls are renamed to this one).
//
// Each frame the backend saves the GL state it changes and restores it
// after drawing. In a browser the viewport, the scissor box and the blend
// state are not kept by WebGL on the page's side: each getParameter is a
// synchronous round trip to the GPU process, and the first one of a frame
// waits for it to finish the commands before, the previous frame's drawing
// included (4-5 ms of a frame with SwiftShader, docs/benchmarks-web.md).
// Nothing else on the page draws with this context and those values are
// only written back, so each is asked for once and the answer kept; the
// other names (bindings, which WebGL answers on the page's side) pass through.
#include <GLES3/gl3.h>

#include <array>

namespace {

struct Cached {
  GLenum name;
  int count;
  bool known = false;
  std::array<GLint, 4> value{};
};

Cached cache[] = {
    {GL_VIEWPORT, 4},          {GL_SCISSOR_BOX, 4},         {GL_BLEND_SRC_RGB, 1},
    {GL_BLEND_DST_RGB, 1},     {GL_BLEND_SRC_ALPHA, 1},     {GL_BLEND_DST_ALPHA, 1},
    {GL_BLEND_EQUATION_RGB, 1}, {GL_BLEND_EQUATION_ALPHA, 1},
};

}  // namespace

extern "C" void distlab_web_glGetIntegerv(GLenum name, GLint* data) {
  for (Cached& c : cache) {
    if (c.name != name) continue;
    if (!c.known) {
      glGetIntegerv(name, c.value.data());
      c.known = true;
    }
    for (int i = 0; i < c.count; ++i) data[i] = c.value[i];
    return;
  }
  glGetIntegerv(name, data);
}
