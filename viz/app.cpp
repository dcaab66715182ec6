#include "app.hpp"

#include <imgui.h>
#include <sys/stat.h>

namespace distlab::viz {
namespace {

constexpr const char* kFontPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

}  // namespace

void setup_imgui(float scale) {
  ImGui::StyleColorsDark();
  ImGuiStyle& style = ImGui::GetStyle();
  style.WindowRounding = 0.0f;
  style.FrameRounding = 3.0f;
  style.ScaleAllSizes(scale);
  // DejaVu Sans reads better on a projector than ImGui's bitmap font; the
  // bitmap font (scaled) is the fallback when it is not installed.
  ImGuiIO& io = ImGui::GetIO();
  struct stat info {};
  if (stat(kFontPath, &info) == 0 && io.Fonts->AddFontFromFileTTF(kFontPath, 15.0f * scale) != nullptr) return;
  ImFontConfig config;
  config.SizePixels = 13.0f * scale;
  io.Fonts->AddFontDefault(&config);
}

App::App(const Options& options)
    : first_tab_(options.panel == "trace" ? Tab::kTrace : Tab::kCollectives), collectives_(options) {
  if (!options.trace_files.empty()) trace_.open_files(options.trace_files);
  if (options.listen_port >= 0) trace_.listen(options.listen_port, options.bind);
  if (!options.view_ms.empty()) {
    const auto [begin, end] = parse_range(options.view_ms);
    trace_.set_view_ms(begin, end);
  }
  trace_.set_arrow_mode(parse_arrow_mode(options.arrows));
  trace_.set_scale(options.scale);
}

void App::frame() {
  trace_.update();
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoBackground |
                                 ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus;
  ImGui::Begin("DistLab", nullptr, flags);
  if (ImGui::BeginTabBar("panels")) {
    auto tab_flags = [this](Tab tab) {
      return first_frame_ && tab == first_tab_ ? ImGuiTabItemFlags_SetSelected : ImGuiTabItemFlags_None;
    };
    if (ImGui::BeginTabItem("Collectives", nullptr, tab_flags(Tab::kCollectives))) {
      collectives_.draw();
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Trace", nullptr, tab_flags(Tab::kTrace))) {
      trace_.draw();
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
  }
  ImGui::End();
  first_frame_ = false;
}

}  // namespace distlab::viz
