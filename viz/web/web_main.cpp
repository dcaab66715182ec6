// distlab-viz in a browser: the seam between the page and the visualizer.
// Everything else (App and its panels, the trace reader, options.cpp) is the
// native program's code; only this differs from main.cpp + window.cpp:
//
//   - the options come from the page's address (url_query.hpp), and the
//     traces it names were fetched by the page into the in-memory file
//     system before main() runs (index.html);
//   - the frame loop is the browser's (emscripten_set_main_loop), drawing
//     into a WebGL 2 canvas the size of the page, a device pixel per
//     pixel (scale_to: crisp at any devicePixelRatio);
//   - traces dropped on the page or picked with its button are written to
//     the in-memory file system and opened as --trace would open them; a
//     plan record among them (its JSON says "format": "distlab-plan") opens
//     in the Plan panel instead, as --plan would;
//   - what the native program prints or dies of becomes a message in the
//     page (Module.distlabMessage), and the tab stays alive: bad options,
//     an unreadable trace or an unknown panel leave the default view.
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <emscripten.h>
#include <emscripten/html5.h>
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "app.hpp"
#include "colors.hpp"
#include "controls.hpp"
#include "options.hpp"
#include "plan_model.hpp"
#include "url_query.hpp"

namespace {

using namespace distlab::viz;

EM_JS(void, page_message, (const char* kind, const char* text),
      { Module.distlabMessage(UTF8ToString(kind), UTF8ToString(text)); });
// What the App says while starting: a warning (a truncated trace) stands out.
void page_app_messages(const App& app) {
  for (const std::string& message : app.messages())
    page_message(message.rfind("warning", 0) == 0 ? "warning" : "info", message.c_str());
}
EM_JS(void, page_first_frame, (), { Module.distlabFirstFrame(); });
// The trace files read as they downloaded, written into the file system
// (until then their paths hold empty files).
EM_JS(void, page_write_downloaded_files, (), { Module.distlabWriteDownloadedFiles(); });
EM_JS(int, page_width, (), { return window.innerWidth; });
EM_JS(int, page_height, (), { return window.innerHeight; });
EM_JS(double, page_pixel_ratio, (), { return window.devicePixelRatio || 1; });

struct Page {
  GLFWwindow* window = nullptr;
  std::string query;           // the address's parameters, as given
  Options options;             // as parsed (the defaults when they were not understood)
  std::unique_ptr<App> app;
  uint64_t frames = 0;
  double last_frame_ms = 0.0;  // building and submitting the last frame
  std::string counts;          // distlab_counts' answer, kept alive for the page
  double pixel_ratio = 0.0;    // the device pixels per CSS pixel the fonts and sizes were made for
  std::unique_ptr<TraceDownload> download;  // traces being fetched or dropped, read as they arrive
  bool downloading = false;                 // the file arriving now is one of them
};
Page page;

// The panels take their sizes from the scale they are built with: an App
// for this page is built at the address's scale times the ratio. It takes
// the traces read as they downloaded, when they are the ones it opens; the
// page writes their files when they were not read whole (the usual open
// recovers what it can, with its messages) or the panel reads them again.
std::unique_ptr<App> app_for_page(Options options) {
  options.scale *= static_cast<float>(page.pixel_ratio);
  std::unique_ptr<OpenedTraces> downloaded = page.download != nullptr ? page.download->opened() : nullptr;
  page.download.reset();
  if (downloaded == nullptr || App::reads_trace_files(options.panel)) page_write_downloaded_files();
  return std::make_unique<App>(options, std::move(downloaded));
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// Builds the App; on failure says why in the page and falls back: first
// without the plan when it was the plan, without the traces, then to the
// default view.
void start_app(Options options) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    try {
      page.app = app_for_page(options);
      page.options = options;
      page_app_messages(*page.app);
      return;
    } catch (const PlanFormatError& e) {
      page_message("error", e.what());
      options.plan_file.clear();
      page_message("error", "the plan could not be opened: showing the panel without it");
      continue;
    } catch (const std::exception& e) {
      page_message("error", e.what());
    }
    if (attempt < 2 && !options.trace_files.empty()) {
      options.trace_files.clear();
      page_message("error", "the trace could not be opened: showing the panel without it");
    } else {
      options = Options{};
      page_message("error", "showing the default view");
    }
  }
}

// High-DPI: the canvas holds a device pixel per pixel (the window is the
// page's CSS size times the ratio; index.html keeps its CSS size at the
// page's), and the text and widgets are scaled by the ratio, as the native
// program's --scale does: crisp at any devicePixelRatio. Emscripten scales
// the mouse into the canvas's pixels. A ratio that changes (the page
// zoomed, the window moved to another screen) makes the fonts again and
// draws the panels at the new size, with what they hold: the trace files
// were read once and are gone from the file system.
void scale_to(double ratio) {
  ImGui::GetStyle() = ImGuiStyle();
  ImGui::GetIO().Fonts->Clear();
  setup_imgui(page.options.scale * static_cast<float>(ratio));
  if (page.pixel_ratio > 0) ImGui_ImplOpenGL3_DestroyDeviceObjects();  // the font texture, made again by NewFrame
  page.pixel_ratio = ratio;
  if (page.app) page.app->set_scale(page.options.scale * static_cast<float>(ratio));
}

Options options_of_query(const std::string& query, const std::vector<std::string>& trace_paths,
                         const std::string& plan_path) {
  Options options;
  std::vector<std::string> args;
  try {
    args = arguments_from_query(query, trace_paths, plan_path);
  } catch (const std::exception& e) {
    page_message("error", e.what());
    return Options{};
  }
  std::vector<const char*> argv{"distlab-viz"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  // CLI11 prints what it refuses (stderr: the page's messages) and says stop.
  if (parse_options(static_cast<int>(argv.size()), argv.data(), options)) {
    page_message("error", "the address's parameters were not understood: showing the default view");
    return Options{};
  }
  return options;
}

void frame() {
  const double start = emscripten_get_now();
  const double ratio = page_pixel_ratio();
  if (ratio != page.pixel_ratio) scale_to(ratio);
  const int width = static_cast<int>(page_width() * ratio + 0.5);
  const int height = static_cast<int>(page_height() * ratio + 0.5);
  int window_width = 0;
  int window_height = 0;
  glfwGetWindowSize(page.window, &window_width, &window_height);
  if (width != window_width || height != window_height) glfwSetWindowSize(page.window, width, height);
  glfwPollEvents();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  cap_frame_time();
  ImGui::NewFrame();
  page.app->frame();
  ImGui::Render();
  int fb_width = 0;
  int fb_height = 0;
  glfwGetFramebufferSize(page.window, &fb_width, &fb_height);
  glViewport(0, 0, fb_width, fb_height);
  glClearColor(red_of(kCanvasColor) / 255.0f, green_of(kCanvasColor) / 255.0f, blue_of(kCanvasColor) / 255.0f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  page.last_frame_ms = emscripten_get_now() - start;
  if (page.frames++ == 0) page_first_frame();
}

}  // namespace

// The page's calls (index.html).
extern "C" {

// The trace and flight-recorder URLs the address names ('\n'-separated), and
// its plan record's (distlab_plan_url), for the page to fetch before it calls
// main().
EMSCRIPTEN_KEEPALIVE const char* distlab_fetched_urls(const char* query) {
  static std::string urls;
  urls.clear();
  for (const std::string& url : fetched_urls_of_query(query)) urls += url + "\n";
  return urls.c_str();
}

// The plan record's URL the address names (`plan=`; empty when none).
EMSCRIPTEN_KEEPALIVE const char* distlab_plan_url(const char* query) {
  static std::string url;
  url = plan_url_of_query(query);
  return url.c_str();
}

// 1 when `bytes` (a dropped file, or its beginning) is a plan record.
EMSCRIPTEN_KEEPALIVE int distlab_is_plan(const char* bytes, int size) {
  return looks_like_plan_record(std::string_view(bytes, static_cast<size_t>(std::max(size, 0)))) ? 1 : 0;
}

// Opens a plan record the page wrote into its file system in the Plan
// panel, as --plan would, keeping the traces the page shows. 0 when it
// cannot be read (the page says why; the panel keeps what it held).
EMSCRIPTEN_KEEPALIVE int distlab_open_plan(const char* path) {
  if (!page.app) return 0;
  try {
    page.app->open_plan(path);
    page.options.panel = "plan";
    page_message("info", page.app->messages().back().c_str());
    return 1;
  } catch (const std::exception& e) {
    page_message("error", e.what());
    return 0;
  }
}

// Opens trace files the page wrote into its file system ('\n'-separated
// paths; flight-recorder files among them by their names), as `?trace=`
// would have: the panel of the address if it shows traces, else the Trace
// panel.
EMSCRIPTEN_KEEPALIVE int distlab_open_traces(const char* paths_text) {
  const std::vector<std::string> paths = split_lines(paths_text);
  Options options = page.options;
  options.trace_files.clear();
  options.flight_paths.clear();
  for (const std::string& path : paths) (is_flight_file(path) ? options.flight_paths : options.trace_files).push_back(path);
  if (options.panel == "collectives" || options.panel == "context" || options.panel == "plan")
    options.panel = "trace";
  options.plan_file.clear();  // its file is gone: the plan shown is handed over below
  try {
    auto app = app_for_page(options);
    if (page.app && page.app->plan_panel().opened())
      app->plan_panel().set_plan(page.app->plan_panel().plan(), page.app->plan_panel().path());
    page.app = std::move(app);  // the old view stays when the new trace cannot be read
    page.options = options;
    page_app_messages(*page.app);
    return 1;
  } catch (const std::exception& e) {
    page_message("error", e.what());
    return 0;
  }
}

// Traces read while the page fetches them (or reads dropped files): the
// paths their files will have ('\n'-separated), then per file its path and
// size (0 when not known), its pieces written into space(n) and committed,
// and its end. The App built next (main, distlab_open_traces) takes the
// events already read when every trace was read whole (app_for_page).
EMSCRIPTEN_KEEPALIVE void distlab_download_begin(const char* paths_text) {
  std::vector<std::string> traces;
  for (const std::string& path : split_lines(paths_text))
    if (!is_flight_file(path)) traces.push_back(path);
  page.download = std::make_unique<TraceDownload>(traces);
  page.downloading = false;
}
// 1 when the file is one of the traces read as it arrives, 0 when the page
// must write it (a flight-recorder file).
EMSCRIPTEN_KEEPALIVE int distlab_download_file(const char* path, double expected_bytes) {
  page.downloading = page.download != nullptr && !is_flight_file(path);
  if (page.downloading) page.download->begin_file(static_cast<int64_t>(expected_bytes));
  return page.downloading ? 1 : 0;
}
EMSCRIPTEN_KEEPALIVE char* distlab_download_space(int bytes) {
  if (page.downloading) return page.download->space(static_cast<size_t>(bytes));
  static std::string nowhere;  // not a trace being read: the bytes are dropped
  nowhere.resize(static_cast<size_t>(bytes));
  return nowhere.data();
}
EMSCRIPTEN_KEEPALIVE void distlab_download_commit(int bytes) {
  if (page.downloading) page.download->commit(static_cast<size_t>(bytes));
}
EMSCRIPTEN_KEEPALIVE void distlab_download_end_file() {
  if (page.downloading) page.download->end_file();
  page.downloading = false;
}

// What the Trace panel holds, for the tests and the measurements, and where
// the Collectives panel's time cursor stands (the keys move it):
// {"frames":F,"frame_ms":T,"panel":"...","cursor_s":S,"playing":0|1,"events":N,
//  "counters":C,"live":L,"flight_files":F,"plan_layouts":P,"plan_measured":M,
//  "rows":[{"rank":R,"lane":"...","events":K},...]}
EMSCRIPTEN_KEEPALIVE const char* distlab_counts() {
  std::string out = "{\"frames\":" + std::to_string(page.frames) + ",\"frame_ms\":" + std::to_string(page.last_frame_ms) +
                    ",\"ratio\":" + std::to_string(page.pixel_ratio) + ",\"panel\":\"" + page.options.panel + "\"";
  if (page.app) {
    const TimeCursor& cursor = page.app->collectives_panel().cursor();
    char time[32];
    std::snprintf(time, sizeof time, "%.9g", cursor.time_s);
    out += ",\"cursor_s\":" + std::string(time) + ",\"playing\":" + (cursor.playing ? "1" : "0");
    const TraceModel& model = page.app->trace_panel().model();
    const LiveFeed* live = page.app->trace_panel().live();
    const PlanRecord& plan = page.app->plan_panel().plan();
    out += ",\"events\":" + std::to_string(model.size()) + ",\"counters\":" + std::to_string(model.counter_count()) +
           ",\"live\":" + std::to_string(live != nullptr ? live->total() : 0) +
           ",\"flight_files\":" + std::to_string(page.app->trace_panel().flight().model().file_count()) +
           ",\"plan_layouts\":" + std::to_string(plan.layouts.size()) +
           ",\"plan_measured\":" + std::to_string(plan.measured_count()) + ",\"rows\":[";
    bool first = true;
    for (const TraceRowData& row : model.rows()) {
      std::string lane;
      for (char c : row.lane) lane += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
      out += std::string(first ? "" : ",") + "{\"rank\":" + std::to_string(row.rank) + ",\"lane\":\"" + lane +
             "\",\"events\":" + std::to_string(row.events.size()) + "}";
      first = false;
    }
    out += "]";
  }
  out += "}";
  page.counts = out;
  return page.counts.c_str();
}

}  // extern "C"

// argv[1]: the address's query; argv[2]: the plan record it named, fetched
// (empty when none); argv[3...]: the traces it named, fetched.
int main(int argc, char** argv) {
  page.query = argc > 1 ? argv[1] : "";
  const std::string plan_path = argc > 2 ? argv[2] : "";
  std::vector<std::string> trace_paths(argv + std::min(argc, 3), argv + argc);
  Options options = options_of_query(page.query, trace_paths, plan_path);

  if (!glfwInit()) {
    page_message("error", "no WebGL: this browser cannot draw the visualizer");
    return 1;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  page.window = glfwCreateWindow(page_width(), page_height(), "DistLab", nullptr, nullptr);  // sized by the first frame
  if (page.window == nullptr) {
    page_message("error", "no WebGL 2 context: this browser cannot draw the visualizer");
    return 1;
  }
  glfwMakeContextCurrent(page.window);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  ImGui_ImplGlfw_InitForOpenGL(page.window, true);
  ImGui_ImplOpenGL3_Init("#version 300 es");
  page.options = options;
  scale_to(page_pixel_ratio());  // options.scale times the page's ratio
  start_app(options);
  emscripten_set_main_loop(frame, 0, false);
  return 0;
}
