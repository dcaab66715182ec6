#include "app.hpp"

#include <imgui.h>
#include <sys/stat.h>

#include <stdexcept>

#include "trace_loader.hpp"

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

App::Tab App::first_tab_of(const std::string& panel) {
  if (panel == "trace") return Tab::kTrace;
  if (panel == "pipeline") return Tab::kPipeline;
  if (panel == "ddp") return Tab::kDdp;
  if (panel == "memory") return Tab::kMemory;
  if (panel == "context") return Tab::kContext;
  if (panel == "experts") return Tab::kExperts;
  if (panel == "wire") return Tab::kWire;
  if (panel == "plan") return Tab::kPlan;
  return Tab::kCollectives;
}

bool App::reads_trace_files(const std::string& panel) {
  return panel == "pipeline" || panel == "ddp" || panel == "experts" || panel == "wire";
}

App::App(const Options& options, std::unique_ptr<OpenedTraces> downloaded)
    : first_tab_(first_tab_of(options.panel)), collectives_(options), pipeline_(options), ddp_(options), memory_(options),
      context_(options), experts_(options), wire_(options), plan_(options) {
  // A plan first: a record that cannot be read stops before any trace is.
  if (!options.plan_file.empty()) read_plan(options.plan_file);
  // The Trace panel holds the trace; the Memory panel draws its memory samples.
  if (downloaded != nullptr && downloaded->paths == options.trace_files)
    trace_.open(std::move(*downloaded));
  else if (!options.trace_files.empty())
    trace_.open_files(options.trace_files);
  // Flight-recorder files: those asked for, else any beside the trace.
  if (!options.flight_paths.empty()) {
    trace_.open_flight(options.flight_paths);
    // Without a trace they are all there is to show.
    const FlightModel& flight = trace_.flight().model();
    if (options.trace_files.empty() && flight.file_count() == 0) {
      std::string why;
      for (const std::string& line : flight.diagnosis().refused) why += (why.empty() ? "" : "; ") + line;
      throw std::runtime_error("no flight file could be read: " + why);
    }
  } else if (!options.trace_files.empty()) {
    trace_.open_flight_beside(options.trace_files);
  }
  if (!options.trace_files.empty() && options.panel == "memory" && trace_.memory().empty())
    messages_.push_back("no memory samples in the trace (counters named \"memory STAGE\" or \"accounting STAGE\")");
  // The Pipeline, DDP, Experts and Wire panels read the same files for what
  // they show: the executor's stages, the reducer's buckets, the counters.
  if (!options.trace_files.empty() && reads_trace_files(options.panel)) {
    std::vector<trace::Event> events;
    for (const std::string& path : options.trace_files) {
      LoadedTrace loaded = load_trace_file(path);
      events.insert(events.end(), std::make_move_iterator(loaded.events.begin()),
                    std::make_move_iterator(loaded.events.end()));
    }
    if (options.panel == "pipeline" && !pipeline_.set_trace(events))
      messages_.push_back("no pipeline run in the trace (no events on lanes \"stage s\" with a schedule)");
    if (options.panel == "experts" && !experts_.set_trace(events))
      messages_.push_back("no tokens per expert in the trace (no counters named \"experts LABEL\")");
    if (options.panel == "experts" && !experts_.select(options.experts_label, options.experts_step - 1)) {
      std::string labels;
      for (const std::string& label : experts_.model().labels()) labels += (labels.empty() ? "" : ", ") + label;
      messages_.push_back("no counter \"experts " + options.experts_label + "\" in the trace (it holds: " + labels + ")");
    }
    if (options.panel == "wire") set_wire_trace(events, options);
    if (options.panel == "ddp" && !ddp_.set_trace(events))
      messages_.push_back("no DDP step in the trace (no \"bucket plan\" and \"wait for buckets\" events on lane ddp)");
  }
  if (options.listen_port >= 0) trace_.listen(options.listen_port, options.bind);
  if (!options.view_ms.empty()) {
    const auto [begin, end] = parse_range(options.view_ms);
    trace_.set_view_ms(begin, end);
  }
  trace_.set_arrow_mode(parse_arrow_mode(options.arrows));
  trace_.set_scale(options.scale);
}

void App::read_plan(const std::string& path) {
  plan_.open(path);
  messages_.push_back("opened " + path + ": a plan of " + plan_.plan().summary());
}

void App::open_plan(const std::string& path) {
  read_plan(path);
  first_tab_ = Tab::kPlan;
  first_frame_ = true;
}

void App::set_scale(float scale) {
  collectives_.set_scale(scale);
  trace_.set_scale(scale);
  pipeline_.set_scale(scale);
  ddp_.set_scale(scale);
  memory_.set_scale(scale);
  context_.set_scale(scale);
  experts_.set_scale(scale);
  wire_.set_scale(scale);
  plan_.set_scale(scale);
}

void App::set_wire_trace(const std::vector<trace::Event>& events, const Options& options) {
  const bool found = wire_.set_trace(events);
  const WireModel& model = wire_.model();
  if (model.skipped() > 0) messages_.push_back(model.skipped_text());
  if (!found) {
    messages_.push_back("no ring samples in the trace (no counters named \"shm ring S->D (LABEL)\")");
    return;
  }
  const std::optional<RingId> wanted = parse_ring_id(options.wire_ring);
  if (!options.wire_ring.empty() && !wanted)
    messages_.push_back("--wire-ring " + options.wire_ring + ": expected S->D or S->D (LABEL), two different ranks");
  if (wanted && !wire_.select_ring(*wanted)) {
    std::string rings;
    for (const WireRing& ring : model.rings()) rings += (rings.empty() ? "" : ", ") + ring_label(ring.id);
    messages_.push_back("no ring " + options.wire_ring + " in the trace (it holds: " + rings + ")");
  }
  if (options.wire_sample == 0) {
    wire_.set_sample(model.rings()[static_cast<size_t>(wire_.ring())].fullest());
    return;
  }
  wire_.set_sample(options.wire_sample - 1);
  if (options.wire_sample > wire_.sample_count())
    messages_.push_back("ring " + ring_label(model.rings()[static_cast<size_t>(wire_.ring())].id) + " has " +
                        std::to_string(wire_.sample_count()) + " samples: showing the last");
}

std::vector<std::string> App::messages() const {
  std::vector<std::string> all = trace_.messages();
  all.insert(all.end(), messages_.begin(), messages_.end());
  return all;
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
    if (ImGui::BeginTabItem("Pipeline", nullptr, tab_flags(Tab::kPipeline))) {
      pipeline_.draw();
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("DDP", nullptr, tab_flags(Tab::kDdp))) {
      ddp_.draw();
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Memory", nullptr, tab_flags(Tab::kMemory))) {
      memory_.draw(trace_.memory(), trace_.model().origin_us());
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Context parallel", nullptr, tab_flags(Tab::kContext))) {
      context_.draw();
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Experts", nullptr, tab_flags(Tab::kExperts))) {
      experts_.draw();
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Wire", nullptr, tab_flags(Tab::kWire))) {
      wire_.draw();
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Plan", nullptr, tab_flags(Tab::kPlan))) {
      plan_.draw();
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
  }
  ImGui::End();
  first_frame_ = false;
}

}  // namespace distlab::viz
