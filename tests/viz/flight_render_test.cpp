// Flight-recorder files on the Trace panel, rendered headless: from dumps
// the test writes with known times, and from a real faulty run on thread
// ranks (viz_flight_fault_emitter: tests/flight's run_fault, rank 2 skips
// all_reduce #4). The marker's x is the panel's time mapping of the time
// read from the files (the waiting ranks' earliest entry into the finding's
// operation); the culprit's rows are probed for their colour; the banner's
// text is compared with what flight::diagnose_files returns, never with
// wording; damaged files are refused with a line while the trace opens.
#include <gtest/gtest.h>
#include <imgui.h>
#include <sys/stat.h>

#include <algorithm>
#include <limits>

#include "app.hpp"
#include "flight/why.hpp"
#include "flight_dumps.hpp"
#include "options.hpp"
#include "render_helpers.hpp"
#include "trace_panel.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

// The real skip run, once per test binary: 4 thread ranks, rank 2 returns
// instead of calling all_reduce #4, the others time out after 300 ms.
const std::string& skip_run_dir() {
  static const std::string dir = [] {
    const std::string d = temp_path("flight_skip_run");
    mkdir(d.c_str(), 0755);
    std::string out;
    const int code = run({VIZ_FLIGHT_EMITTER, "--dir", d, "--fault", "skip", "--culprit", "2", "--ranks", "4",
                          "--timeout-ms", "300"},
                         {}, &out, 60000);
    EXPECT_EQ(code, 0) << out;
    return d;
  }();
  return dir;
}

// The waiting ranks' earliest entry into the finding's operation, read from
// the files.
int64_t parting_us(const std::string& dir, const flight::Finding& f) {
  int64_t earliest = std::numeric_limits<int64_t>::max();
  for (int r : f.waiting)
    for (const flight::Entry& e : flight::read_dump(flight::dump_path(dir, r)).entries)
      if (e.kind == "collective" && e.group == f.group && e.seq == f.seq) earliest = std::min(earliest, e.entered_us);
  return earliest;
}

// A label cell's colour is probed 3 px left of the track area (labels are
// clipped 4 px before it).
float label_x(const TraceFrameLayout& l) { return l.area_min.x - 3.0f; }

Image render_app(App& app, HeadlessRenderer& renderer) {
  setup_imgui(1.0f);
  for (int i = 0; i < 3; ++i) renderer.frame([&] { app.frame(); });
  return renderer.read_pixels();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(FlightRender, FlightFilesAloneMakeTheTimelineAndMarkTheParting) {
  const std::string dir = temp_path("flight_render_skip");
  write_dumps(dir, skip_job());
  HeadlessRenderer renderer(1200, 640);
  TracePanel panel;
  panel.open_flight({dir});
  panel.set_view_ms(-10.0, 620.0);  // ms after the first operation, kT0
  const Image image = render_in_window(renderer, [&] { panel.draw(); });
  const TraceFrameLayout& l = panel.last_layout();
  const FlightFrameLayout& fl = panel.flight().last_layout();
  ASSERT_TRUE(l.drawn);
  EXPECT_TRUE(panel.model().empty());
  EXPECT_EQ(panel.origin_us(), kT0);
  ASSERT_EQ(fl.row_ranks, (std::vector<int>{0, 1, 2, 3}));
  const auto x_of = [&](int64_t us) {
    return l.area_min.x + static_cast<float>(((us - kT0) * 1e-6 + 0.010) / 0.630) * (l.area_max.x - l.area_min.x);
  };
  const auto mid = [&](int rank) { return *fl.row_top_of(rank) + kRowPadding + kLevelHeight * 0.5f; };

  // The marker where ranks 0, 1 and 3 entered all_reduce #4 (rank 0 first),
  // through every row (here the padding above rank 1's spans).
  ASSERT_TRUE(fl.marker_drawn);
  EXPECT_NEAR(fl.marker_x, x_of(kEnter4[0]), 1.0f);
  EXPECT_TRUE(COLOR_AT(image, x_of(kEnter4[0]), *fl.row_top_of(1) + 1.5f, kFlightMarkerColor, 8, 1));
  EXPECT_FALSE(COLOR_AT(image, x_of(kEnter4[0]) - 12, *fl.row_top_of(1) + 1.5f, kFlightMarkerColor, 8, 1));

  // Spans: a completed all_reduce #2, and #4 open until the dump.
  EXPECT_TRUE(COLOR_AT(image, x_of(kT0 + 24'000), mid(0), kFlightDoneColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(kDumped) - 4, mid(0), kFlightOpenColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(kDumped) + 4, mid(0), kCanvasColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(kDumped) - 4, mid(3), kFlightOpenColor, 2, 0));

  // The culprit's row: its background and its label cell; the others' not.
  EXPECT_TRUE(COLOR_AT(image, x_of(kT0 - 5'000), mid(2), kFlightCulpritRowColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(kT0 + 300'000), mid(2), kFlightCulpritRowColor, 2, 0));  // it left after #3
  EXPECT_TRUE(COLOR_AT(image, x_of(kT0 - 5'000), mid(1), kCanvasColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, label_x(l), mid(2), kFlightCulpritRowColor, 2, 0));
  for (int r : {0, 1, 3}) EXPECT_FALSE(COLOR_AT(image, label_x(l), mid(r), kFlightCulpritRowColor, 2, 0)) << r;

  // The banner: the diagnosis' text, on its background, the marker's stripe.
  ASSERT_TRUE(fl.banner_drawn);
  const flight::Diagnosis want = flight::diagnose_files({dir});
  EXPECT_EQ(fl.banner_text, want.findings.front().text);
  EXPECT_TRUE(COLOR_AT(image, fl.banner_min.x + 1, (fl.banner_min.y + fl.banner_max.y) * 0.5f, kFlightMarkerColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, fl.banner_max.x - 3, fl.banner_max.y - 2, kFlightBannerColor, 2, 0));
}

TEST(FlightRender, ZoomedInTheMarkerIsTheFirstEntryToTheMicrosecond) {
  const std::string dir = temp_path("flight_render_zoom");
  write_dumps(dir, skip_job());
  HeadlessRenderer renderer(1200, 640);
  TracePanel panel;
  panel.open_flight({dir});
  panel.set_view_ms(49.5, 50.5);  // 1 ms: the three entries into #4 are 100 and 300 us apart
  const Image image = render_in_window(renderer, [&] { panel.draw(); });
  const TraceFrameLayout& l = panel.last_layout();
  const FlightFrameLayout& fl = panel.flight().last_layout();
  const auto x_of = [&](int64_t us) {
    return l.area_min.x + static_cast<float>(((us - kT0) * 1e-6 - 0.0495) / 0.001) * (l.area_max.x - l.area_min.x);
  };
  const auto mid = [&](int rank) { return *fl.row_top_of(rank) + kRowPadding + kLevelHeight * 0.5f; };
  ASSERT_TRUE(fl.marker_drawn);
  EXPECT_NEAR(fl.marker_x, x_of(kEnter4[0]), 1.0f);
  EXPECT_TRUE(COLOR_AT(image, x_of(kEnter4[0]), *fl.row_top_of(3) + 1.5f, kFlightMarkerColor, 8, 1));
  // Between rank 3's entry (1'050'100) and rank 1's (1'050'300): rank 3 is
  // in #4, rank 1 not yet; rank 0 since the marker. (Probes stay off the
  // axis' grid lines, every 100 us here.)
  const float x = x_of(1'050'150);
  EXPECT_TRUE(COLOR_AT(image, x, mid(3), kFlightOpenColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x, mid(1), kCanvasColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x, mid(0), kFlightOpenColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, x_of(1'050'450), mid(1), kFlightOpenColor, 2, 0));
  // The culprit's line where rank 2 ended #3, with the band from it to the marker.
  ASSERT_TRUE(fl.culprit_drawn);
  EXPECT_NEAR(fl.culprit_x, x_of(kRank2Ended3), 1.0f);
  EXPECT_NEAR(fl.band_x0, x_of(kRank2Ended3), 1.0f);
  EXPECT_NEAR(fl.band_x1, x_of(kEnter4[0]), 1.0f);

  // Hovering: rank 3's #4 is under the mouse there; on rank 1's row nothing is.
  ImGuiIO& io = ImGui::GetIO();
  io.MousePos = ImVec2(x, mid(3));
  render_in_window(renderer, [&] { panel.draw(); }, 2);
  EXPECT_EQ(panel.flight().hovered(), (std::optional<FlightOpRef>{FlightOpRef{3, 4}}));
  io.MousePos = ImVec2(x, mid(1));
  render_in_window(renderer, [&] { panel.draw(); }, 2);
  EXPECT_FALSE(panel.flight().hovered().has_value());
  io.MousePos = ImVec2(-1, -1);
}

// 2,000 operations per rank, 1 ms apart, each 0.8 ms long; rank 0 then
// waits in #2000, which rank 1 never enters.
TEST(FlightRender, ThousandsOfOperationsZoomedOutAreFewBoxesZoomedInOneEach) {
  std::vector<flight::Dump> dumps;
  for (int r = 0; r < 2; ++r) {
    std::vector<flight::Entry> entries;
    for (uint64_t k = 0; k < 2000; ++k)
      entries.push_back(collective(k, k, "all_reduce", kT0 + 1000 * int64_t(k), flight::State::kCompleted,
                                   kT0 + 1000 * int64_t(k) + 800));
    if (r == 0) entries.push_back(collective(2000, 2000, "all_reduce", kT0 + 2'000'000, flight::State::kStarted, 0));
    dumps.push_back(make_dump(r, 2, entries));
    dumps.back().dumped_us = kT0 + 2'100'000;
  }
  const std::string dir = temp_path("flight_render_many");
  write_dumps(dir, dumps);
  HeadlessRenderer renderer(1200, 640);
  TracePanel panel;
  panel.open_flight({dir});

  panel.set_view_ms(0.0, 2100.0);  // 0.5 px per operation
  Image image = render_in_window(renderer, [&] { panel.draw(); });
  const TraceFrameLayout& l = panel.last_layout();
  const FlightFrameLayout& fl = panel.flight().last_layout();
  const float width = l.area_max.x - l.area_min.x;
  EXPECT_LE(fl.boxes, static_cast<size_t>(2 * (width / kMergePx + 2)));
  const auto mid = [&](int rank) { return *fl.row_top_of(rank) + kRowPadding + kLevelHeight * 0.5f; };
  for (double ms : {100.3, 1000.3, 1900.3})  // no gap shows through the merged runs
    for (int r = 0; r < 2; ++r)
      EXPECT_TRUE(COLOR_AT(image, l.axis.x_of(ms * 1e-3), mid(r), kFlightDoneColor, 2, 0)) << ms << " ms, rank " << r;
  EXPECT_TRUE(COLOR_AT(image, l.axis.x_of(2.05), mid(0), kFlightOpenColor, 2, 0));

  panel.set_view_ms(100.0, 110.0);  // 106 px per operation
  image = render_in_window(renderer, [&] { panel.draw(); });
  size_t visible = 0;  // operations meeting [100 ms, 110 ms], counted naively
  for (const flight::Dump& d : dumps)
    for (const flight::Entry& e : d.entries)
      visible += e.entered_us <= kT0 + 110'000 && e.ended_us >= kT0 + 100'000;
  EXPECT_EQ(fl.boxes, visible);
  EXPECT_TRUE(COLOR_AT(image, l.axis.x_of(0.1053), mid(0), kFlightDoneColor, 2, 0));
  EXPECT_TRUE(COLOR_AT(image, l.axis.x_of(0.1089), mid(0), kCanvasColor, 2, 0));  // between #108 and #109
  EXPECT_TRUE(COLOR_AT(image, l.axis.x_of(0.1089), mid(1), kFlightCulpritRowColor, 2, 0));  // rank 1's row
}

TEST(FlightRender, ARealSkipRunsFilesBesideItsTraceMarkWhereTheRanksPart) {
  const std::string& dir = skip_run_dir();
  const flight::Diagnosis want = flight::diagnose_files({dir});
  ASSERT_FALSE(want.findings.empty());
  const flight::Finding& f = want.findings.front();
  // What the emitter injected: rank 2 never entered all_reduce #4.
  ASSERT_EQ(f.cause, "skip") << flight::to_text(want);
  ASSERT_EQ(f.culprits, std::vector<int>{2});
  ASSERT_EQ(f.seq, 4u);
  ASSERT_EQ(f.op, "all_reduce");

  Options o;
  o.panel = "trace";
  o.trace_files = {dir + "/trace.json"};  // no --flight: the files beside it are found
  App app(o);
  const auto messages = app.messages();
  EXPECT_TRUE(std::any_of(messages.begin(), messages.end(), [&](const std::string& m) {
    return contains(m, "flight files beside the trace: " + dir + "/flight.rank*.json");
  }));
  HeadlessRenderer renderer(1400, 800);
  const Image image = render_app(app, renderer);
  const TracePanel& panel = app.trace_panel();
  const TraceModel& model = panel.model();
  const TraceFrameLayout& l = panel.last_layout();
  const FlightFrameLayout& fl = panel.flight().last_layout();
  ASSERT_FALSE(model.empty());

  EXPECT_EQ(fl.banner_text, f.text);
  // The marker at the panel's mapping of the time read from the files; the
  // first view is the one around it.
  const float x = l.axis.x_of(model.seconds_of(parting_us(dir, f)));
  ASSERT_TRUE(fl.marker_drawn);
  EXPECT_NEAR(fl.marker_x, x, 1.0f);
  EXPECT_GT(x, l.area_min.x);
  EXPECT_LT(x, l.area_max.x);
  ASSERT_TRUE(fl.row_top_of(1).has_value());
  EXPECT_TRUE(COLOR_AT(image, x, *fl.row_top_of(1) + 1.5f, kFlightMarkerColor, 8, 1));

  // Rank 2's rows are the highlighted ones: its trace rows and its flight row.
  int culprit_rows = 0;
  for (size_t i = 0; i < model.rows().size(); ++i) {
    const float y = l.row_tops[i] + kRowPadding + kLevelHeight * 0.5f;
    const bool lit = COLOR_AT(image, label_x(l), y, kFlightCulpritRowColor, 2, 0);
    EXPECT_EQ(lit, model.rows()[i].rank == 2) << "rank " << model.rows()[i].rank << " " << model.rows()[i].lane;
    culprit_rows += lit;
  }
  EXPECT_GE(culprit_rows, 1);
  EXPECT_TRUE(COLOR_AT(image, label_x(l), *fl.row_top_of(2) + 10, kFlightCulpritRowColor, 2, 0));
  EXPECT_FALSE(COLOR_AT(image, label_x(l), *fl.row_top_of(3) + 10, kFlightCulpritRowColor, 2, 0));

  // One clock: every traced collective of a rank lies inside its flight
  // record (the recorder enters before the span begins and ends after it).
  for (int r = 0; r < 4; ++r) {
    std::vector<std::pair<int64_t, int64_t>> spans;
    for (uint32_t i = 0; i < model.size(); ++i)
      if (model.record(i).rank == r && model.text(model.record(i).category) == "collective")
        spans.emplace_back(model.record(i).begin_us, model.record(i).end_us);
    std::sort(spans.begin(), spans.end());
    const flight::Dump dump = flight::read_dump(flight::dump_path(dir, r));
    ASSERT_EQ(spans.size(), dump.entries.size()) << "rank " << r;
    for (size_t k = 0; k < spans.size(); ++k) {
      EXPECT_LE(dump.entries[k].entered_us, spans[k].first) << "rank " << r << " #" << k;
      EXPECT_GE(dump.entries[k].ended_us, spans[k].second) << "rank " << r << " #" << k;
    }
  }
}

TEST(FlightCli, ADamagedFlightFileIsRefusedAndTheTraceStillOpens) {
  const std::string& run_dir = skip_run_dir();
  const std::string dir = temp_path("flight_damaged");
  mkdir(dir.c_str(), 0755);
  write_text(dir + "/trace.json", read_text(run_dir + "/trace.json"));
  for (int r : {0, 2}) write_text(flight::dump_path(dir, r), read_text(flight::dump_path(run_dir, r)));
  const std::string one = read_text(flight::dump_path(run_dir, 1));
  write_text(flight::dump_path(dir, 1), one.substr(0, one.size() / 2));  // cut short
  write_text(flight::dump_path(dir, 3), "\x01\x02 not json");
  const flight::Diagnosis want = flight::diagnose_files({dir});
  ASSERT_EQ(want.refused.size(), 2u) << flight::to_text(want);

  const std::string png = temp_path("flight_damaged.png");
  for (bool named : {true, false}) {
    std::vector<std::string> argv = {VIZ_BINARY, "--trace", dir + "/trace.json"};
    if (named) argv.insert(argv.end(), {"--flight", dir});
    argv.insert(argv.end(), {"--screenshot", png, "--width", "900", "--height", "500"});
    std::string out;
    ASSERT_EQ(run(argv, {"DISPLAY=", "WAYLAND_DISPLAY="}, &out), 0) << out;
    for (const std::string& line : want.refused) EXPECT_TRUE(contains(out, "distlab-viz: refused " + line + "\n")) << out;
    EXPECT_TRUE(contains(out, "distlab-viz: opened " + dir + "/trace.json: ")) << out;
    EXPECT_TRUE(contains(out, "distlab-viz: flight recorder: " + want.summary + "\n")) << out;
    EXPECT_EQ(contains(out, "flight files beside the trace"), !named) << out;
    EXPECT_EQ(read_png(png).width, 900);
  }
}

TEST(FlightCli, FlightFilesAloneOpenWithoutATrace) {
  const std::string& dir = skip_run_dir();
  const flight::Diagnosis want = flight::diagnose_files({dir});
  const std::string png = temp_path("flight_alone.png");
  std::string out;
  ASSERT_EQ(run({VIZ_BINARY, "--flight", dir, "--screenshot", png, "--width", "1000", "--height", "560"},
                {"DISPLAY=", "WAYLAND_DISPLAY="}, &out),
            0)
      << out;
  EXPECT_TRUE(contains(out, "distlab-viz: flight recorder: " + want.summary + "\n")) << out;
  const Image from_cli = read_png(png);

  Options o;
  o.panel = "trace";
  o.flight_paths = {dir};
  App app(o);
  HeadlessRenderer renderer(1000, 560);
  const Image here = render_app(app, renderer);
  size_t different = 0;
  for (int y = 0; y < 560; ++y)
    for (int x = 0; x < 1000; ++x) different += here.at(x, y) != from_cli.at(x, y);
  EXPECT_EQ(different, 0u);

  // Time 0 is the first operation of any rank's file.
  int64_t first = std::numeric_limits<int64_t>::max();
  for (int r = 0; r < 4; ++r)
    for (const flight::Entry& e : flight::read_dump(flight::dump_path(dir, r)).entries)
      first = std::min(first, e.entered_us);
  const TracePanel& panel = app.trace_panel();
  const TraceFrameLayout& l = panel.last_layout();
  const FlightFrameLayout& fl = panel.flight().last_layout();
  EXPECT_TRUE(panel.model().empty());
  EXPECT_EQ(panel.origin_us(), first);
  EXPECT_EQ(fl.row_ranks, (std::vector<int>{0, 1, 2, 3}));
  const float x = l.axis.x_of((parting_us(dir, want.findings.front()) - first) * 1e-6);
  ASSERT_TRUE(fl.marker_drawn);
  EXPECT_NEAR(fl.marker_x, x, 1.0f);
  EXPECT_TRUE(COLOR_AT(from_cli, x, *fl.row_top_of(0) + 1.5f, kFlightMarkerColor, 8, 1));
  EXPECT_TRUE(COLOR_AT(from_cli, label_x(l), *fl.row_top_of(2) + 10, kFlightCulpritRowColor, 2, 0));
  EXPECT_EQ(fl.banner_text, want.findings.front().text);
}

TEST(FlightCli, FlightFilesAloneWithNoneReadableEndWithOneMessage) {
  const std::string dir = temp_path("flight_none");
  mkdir(dir.c_str(), 0755);
  write_text(flight::dump_path(dir, 0), "{\"format\": \"distlab-flight\", \"version\": 1");
  const flight::Diagnosis want = flight::diagnose_files({dir});
  ASSERT_EQ(want.refused.size(), 1u);
  std::string out;
  EXPECT_EQ(run({VIZ_BINARY, "--flight", dir, "--screenshot", temp_path("flight_none.png")},
                {"DISPLAY=", "WAYLAND_DISPLAY="}, &out),
            1);
  EXPECT_TRUE(contains(out, "distlab-viz: no flight file could be read: " + want.refused.front() + "\n")) << out;
}

}  // namespace
}  // namespace distlab::viz
