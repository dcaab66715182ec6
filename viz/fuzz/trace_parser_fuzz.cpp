// libFuzzer target: whatever bytes arrive as a trace file or as live-stream
// lines, the viewer's path through them (the library's streaming reader,
// the loader's recovery of cut-short files, the model, the layout at two
// zooms) either works or throws trace::TraceFormatError. Anything else (a
// crash, another exception, AddressSanitizer or UBSan findings, memory past
// -rss_limit_mb) is a bug, and so is the streaming reader disagreeing with
// the DOM reader it replaced (dom_reader.hpp). See run_fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "trace/dom_reader.hpp"
#include "trace/reader.hpp"
#include "trace_layout.hpp"
#include "trace_loader.hpp"
#include "trace_model.hpp"

namespace {

using namespace distlab;

void exercise(viz::TraceModel& model) {
  model.finalize();
  std::vector<viz::BoxSpan> boxes;
  std::vector<viz::FlowLink> links;
  const double span = model.seconds_of(model.end_us());
  for (const viz::TimeAxis& axis : {viz::TimeAxis{-0.01 * span, 1.01 * span + 1e-6, 0.0f, 1000.0f},
                                    viz::TimeAxis{0.5 * span, 0.5 * span + 1e-4, 0.0f, 1000.0f}}) {
    for (const auto& row : model.rows())
      for (const auto& track : row.levels) layout_track(track, model.origin_us(), axis, viz::kMergePx, boxes);
    for (const auto& bundle : model.flow_bundles()) layout_flows(model, bundle, axis, viz::kArrowSpacingPx, links);
  }
  for (uint32_t i = 0; i < model.size(); i += 1 + model.size() / 64) {
    (void)model.event(i);
    (void)model.partner(i);
  }
}

// The two readers give the same events or both refuse. One exception: a
// kept value nested deeper than JsonPull::kMaxKeptDepth, which the streaming
// reader refuses on purpose (the DOM reader's dump() recurses).
void compare_readers(const std::string& text, const trace::ReadLimits& limits) {
  std::vector<trace::Event> dom, streamed;
  bool dom_ok = true, stream_ok = true;
  std::string stream_error;
  try {
    dom = trace::parse_chrome_trace_dom(text, limits);
  } catch (const trace::TraceFormatError&) {
    dom_ok = false;
  }
  try {
    streamed = trace::parse_chrome_trace(text, limits);
  } catch (const trace::TraceFormatError& e) {
    stream_ok = false;
    stream_error = e.what();
  }
  if (!stream_ok && stream_error.find("nested deeper") != std::string::npos) return;
  if (dom_ok != stream_ok) {
    std::fprintf(stderr, "readers disagree: dom %s, stream %s (%s)\n", dom_ok ? "accepts" : "refuses",
                 stream_ok ? "accepts" : "refuses", stream_error.c_str());
    std::abort();
  }
  if (dom.size() != streamed.size()) std::abort();
  for (size_t i = 0; i < dom.size(); ++i) {
    const trace::Event& a = dom[i];
    const trace::Event& b = streamed[i];
    if (a.rank != b.rank || a.lane != b.lane || a.name != b.name || a.category != b.category ||
        a.begin_us != b.begin_us || a.end_us != b.end_us || a.bytes != b.bytes || a.peer != b.peer ||
        a.flow != b.flow || a.args != b.args) {
      std::fprintf(stderr, "readers disagree on event %zu\n", i);
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Small limits keep each run fast; the limits themselves are tested elsewhere.
  const trace::ReadLimits limits{int64_t{1} << 20, 20'000};
  compare_readers(text, limits);
  try {
    viz::LoadedTrace loaded = viz::load_trace_text(text, limits);
    viz::TraceModel model;
    model.add(loaded.events);
    exercise(model);
  } catch (const trace::TraceFormatError&) {
  }
  // The same bytes as live-stream lines.
  viz::TraceModel live;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    try {
      live.add({trace::parse_event_line(text.substr(start, end - start))});
    } catch (const trace::TraceFormatError&) {
    }
    start = end + 1;
  }
  exercise(live);
  return 0;
}
