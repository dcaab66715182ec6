// Plan records (plan_model.hpp): a record written out by hand read field by
// field, each measured layout's error and the scores against values worked
// out by hand here (not by the code under test), and every kind of bad
// input refused with a message naming what is wrong.
#include "plan_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

#include "plan_samples.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using nlohmann::json;
using testing_util::kPlanJson;

const PlanLayout& at_place(const PlanRecord& r, int place) {
  for (const PlanLayout& l : r.layouts)
    if (l.place == place) return l;
  throw std::runtime_error("no place " + std::to_string(place));
}

TEST(PlanModel, EveryFieldLandsWhereItShould) {
  const PlanRecord r = read_plan_text(kPlanJson);
  EXPECT_EQ(r.preset, "cpu");
  EXPECT_EQ(r.ranks, 4);
  EXPECT_EQ(r.batch, 20);
  EXPECT_EQ(r.bptt, 35);
  EXPECT_EQ(r.profile.path, "planner/profiles/vm-2026-11-30.json");
  EXPECT_EQ(r.profile.machine, "vm (2 cores)");
  EXPECT_EQ(r.profile.date, "2026-11-30");
  EXPECT_EQ(r.profile.cores, 2);
  EXPECT_EQ(r.profile.device, "cpu");
  EXPECT_EQ(r.accepted, 412);
  EXPECT_EQ(r.refused, 96);
  EXPECT_DOUBLE_EQ(r.predict_seconds, 0.08);
  // By place, whatever the file's order.
  std::vector<int> places;
  for (const PlanLayout& l : r.layouts) places.push_back(l.place);
  EXPECT_EQ(places, (std::vector<int>{1, 2, 3, 4, 9, 12}));

  const PlanLayout& two = at_place(r, 2);
  EXPECT_EQ(two.name, "2x2x1x1 1f1b m4 zero1 none fp32");
  EXPECT_EQ(two.command, "lesson_11_capstone --preset cpu --ranks 4 --replicas 2 --chunks 4 --zero 1");
  EXPECT_EQ(two.pipeline, 2);
  EXPECT_EQ(two.replicas, 2);
  EXPECT_EQ(two.context, 1);
  EXPECT_EQ(two.tensor, 1);
  EXPECT_DOUBLE_EQ(two.predicted.step_ms, 60.0);
  EXPECT_DOUBLE_EQ(two.predicted.critical_ms, 55.5);
  EXPECT_DOUBLE_EQ(two.predicted.packed_ms, 58.25);
  EXPECT_DOUBLE_EQ(two.predicted.bubble, 0.2);
  EXPECT_EQ(two.predicted.wire_bytes, 80'000'000);
  EXPECT_DOUBLE_EQ(two.predicted.mfu, 0.035);
  EXPECT_EQ(two.predicted.job_bytes, 300'000'000);
  // Pipeline rank 0 first, though the file lists rank 1 first; each
  // category in its place.
  ASSERT_EQ(two.memory.size(), 2u);
  const PlanRankMemory& r0 = two.memory[0];
  EXPECT_EQ(r0.pipeline_rank, 0);
  const std::array<int64_t, kPlanCategoryCount> want0 = {20'000'000, 20'000'000, 8'000'000, 8'000'000,
                                                         4'000'000,  12'000'000, 0,         5'000'000};
  EXPECT_EQ(r0.bytes, want0);
  EXPECT_EQ(r0.data_setup, 7'000'000);
  EXPECT_EQ(r0.total, 77'000'000);
  EXPECT_EQ(r0.stacked(), 77'000'000);
  EXPECT_EQ(two.memory[1].pipeline_rank, 1);
  EXPECT_EQ(two.memory[1].bytes[6], 2'000'000);  // backward_scratch
  EXPECT_EQ(two.memory[1].total, 83'000'000);
  ASSERT_TRUE(two.ran());
  EXPECT_FALSE(two.failed());
  const PlanMeasurement& m = *two.measured;
  EXPECT_DOUBLE_EQ(m.median_ms, 80.0);
  EXPECT_DOUBLE_EQ(m.low_ms, 78.0);
  EXPECT_DOUBLE_EQ(m.high_ms, 85.0);
  EXPECT_EQ(m.steps_ms, (std::vector<double>{78, 80, 85}));
  EXPECT_EQ(m.metered_bytes, 300'000'000);
  EXPECT_EQ(m.peak_rss_bytes, 800'000'000);

  const PlanLayout& three = at_place(r, 3);
  ASSERT_TRUE(three.failed());
  EXPECT_FALSE(three.ran());
  EXPECT_EQ(three.measured->error, "rank 1: out of memory");
  EXPECT_FALSE(at_place(r, 4).measured.has_value());
  // Place 9's ranks peak at set-up (the training matrix, 40 MB, beside the
  // model and the data): 55 MB against 47 MB while it trains on rank 3.
  EXPECT_EQ(at_place(r, 9).memory[3].stacked(), 47'000'000);
  EXPECT_EQ(at_place(r, 9).memory[3].total, 55'000'000);
  EXPECT_EQ(r.max_rank_bytes(), testing_util::kPlanFullBytes);

  EXPECT_EQ(r.ran(), (std::vector<int>{0, 1, 4, 5}));  // places 1, 2, 9, 12
  EXPECT_EQ(r.failed(), (std::vector<int>{2}));
  EXPECT_EQ(r.measured_count(), 5);
  EXPECT_EQ(r.summary(), "6 layouts, 5 measured (1 failed)");
  EXPECT_EQ(plan_category_label(2), "gradient shard");
  EXPECT_EQ(plan_category_label(3), "optimizer state");
}

// The errors and scores worked out by hand from the table in plan_samples.hpp:
//   errors (pred - meas) / meas: place 1 (50 - 100) / 100 = -0.5, place 2
//   (60 - 80) / 80 = -0.25, place 9 0, place 12 (100 - 80) / 80 = +0.25;
//   mean |error| 1.0 / 4 = 0.25, worst 0.5.
//   Spearman: predicted 50, 60, 90, 100 rank 1, 2, 3, 4; measured 100, 80,
//   90, 80 rank 4, 1.5, 3, 1.5 (the two 80s share 1 and 2). Both means are
//   2.5; deviations -1.5 -0.5 0.5 1.5 and 1.5 -1 0.5 -1; sum of products -3,
//   of squares 5 and 4.5: -3 / sqrt(22.5) = -sqrt(0.4).
//   Regret: the fastest predicted (place 1, 50 ms) ran 100 ms, the fastest
//   run 80 ms: 100 / 80 - 1 = 0.25.
//   The job's bytes: place 1 (400 - 500) / 500 = -0.2, place 2 0, place 9
//   (200 - 250) / 250 = -0.2; place 12 metered 0 and is left out: mean
//   0.4 / 3, worst 0.2.
TEST(PlanModel, ErrorsAndScoresAreComputedNotTakenFromTheFile) {
  const PlanRecord r = read_plan_text(kPlanJson);
  EXPECT_DOUBLE_EQ(at_place(r, 1).error(), -0.5);
  EXPECT_DOUBLE_EQ(at_place(r, 2).error(), -0.25);
  EXPECT_DOUBLE_EQ(at_place(r, 9).error(), 0.0);
  EXPECT_DOUBLE_EQ(at_place(r, 12).error(), 0.25);
  EXPECT_DOUBLE_EQ(*at_place(r, 1).memory_error(), -0.2);
  EXPECT_DOUBLE_EQ(*at_place(r, 2).memory_error(), 0.0);
  EXPECT_FALSE(at_place(r, 12).memory_error().has_value());
  EXPECT_FALSE(at_place(r, 3).memory_error().has_value());

  const std::optional<PlanScores> s = r.scores();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->layouts, 4);
  EXPECT_DOUBLE_EQ(s->mean_abs_error, 0.25);
  EXPECT_DOUBLE_EQ(s->worst_abs_error, 0.5);
  EXPECT_NEAR(s->spearman, -std::sqrt(0.4), 1e-12);
  EXPECT_DOUBLE_EQ(s->regret, 0.25);
  EXPECT_EQ(s->memory_layouts, 3);
  EXPECT_NEAR(s->memory_mean_abs_error, 0.4 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(s->memory_worst_abs_error, 0.2);
}

TEST(PlanModel, FewerThanTwoRunHaveNoScores) {
  // (The scores themselves are planner/scores.hpp's, tested by hand in
  // tests/planner/scores_test.cpp; the record's are checked above.)
  EXPECT_FALSE(read_plan_text(kPlanJson).layouts.empty());
  // Fewer than 2 layouts ran: no scores.
  json one = json::parse(kPlanJson);
  for (json& l : one["layouts"])
    if (l["place"] != 1 && l.contains("measured")) l.erase("measured");
  EXPECT_FALSE(read_plan_text(one.dump()).scores().has_value());
}

// The record with one change made by `edit`, refused with a message that
// holds `words`.
::testing::AssertionResult refused(const std::function<void(json&)>& edit, const std::string& words) {
  json doc = json::parse(kPlanJson);
  edit(doc);
  try {
    read_plan_text(doc.dump());
  } catch (const PlanFormatError& e) {
    if (std::string(e.what()).find(words) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "refused with \"" << e.what() << "\", not naming \"" << words << "\"";
  }
  return ::testing::AssertionFailure() << "read, not refused (expected \"" << words << "\")";
}

::testing::AssertionResult text_refused(const std::string& text, const std::string& words) {
  try {
    read_plan_text(text);
  } catch (const PlanFormatError& e) {
    if (std::string(e.what()).find(words) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "refused with \"" << e.what() << "\", not naming \"" << words << "\"";
  }
  return ::testing::AssertionFailure() << "read, not refused";
}

TEST(PlanModel, NotJsonAndCutShortAreSaidSo) {
  EXPECT_TRUE(text_refused("", "empty"));
  EXPECT_TRUE(text_refused("  \n", "empty"));
  EXPECT_TRUE(text_refused("this is not JSON\n", "not JSON: a syntax error at line 1"));
  EXPECT_TRUE(
      text_refused("{\"format\": \"distlab-plan\",\n \"version\": 1,\n oops}", "not JSON: a syntax error at line 3"));
  EXPECT_TRUE(text_refused(kPlanJson + "x", "not JSON"));
  // A number past a double's (found by fuzz_plan_record).
  EXPECT_TRUE(text_refused("{\"format\": \"distlab-plan\", \"version\": 1e400}", "number overflow parsing '1e400'"));
  // Cut anywhere, inside a string, a number or between values: cut short.
  for (const double share : {0.001, 0.1, 0.37, 0.5, 0.77, 0.999}) {
    const size_t at = static_cast<size_t>(static_cast<double>(kPlanJson.size()) * share);
    EXPECT_TRUE(text_refused(kPlanJson.substr(0, at), "cut short")) << "cut at " << at << " of " << kPlanJson.size();
  }
  const size_t close = kPlanJson.rfind('}');
  EXPECT_TRUE(text_refused(kPlanJson.substr(0, close), "cut short"));
  EXPECT_NO_THROW(read_plan_text(kPlanJson.substr(0, close + 1)));
  // Nested without end: refused, not a stack overflow.
  EXPECT_TRUE(text_refused(std::string(200000, '['), "nested deeper"));
  EXPECT_TRUE(
      text_refused("{\"format\": \"distlab-plan\", \"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
                   "nested deeper"));
}

TEST(PlanModel, AnotherFormatOrVersionIsRefused) {
  EXPECT_TRUE(text_refused("[1, 2]", "not a plan record: the JSON is an array"));
  EXPECT_TRUE(text_refused("{\"traceEvents\": []}", "not a plan record: no \"format\""));
  EXPECT_TRUE(refused([](json& d) { d["format"] = "chrome-trace"; },
                      "\"format\" is \"chrome-trace\" (a string), not \"distlab-plan\""));
  EXPECT_TRUE(refused([](json& d) { d["format"] = 3; }, "\"format\" is 3"));
  EXPECT_TRUE(refused([](json& d) { d.erase("format"); }, "no \"format\""));
  EXPECT_TRUE(refused([](json& d) { d["version"] = 2; }, "version 2 of the plan record is not known"));
  EXPECT_TRUE(refused([](json& d) { d["version"] = "1"; }, "version: \"1\" (a string), expected an integer"));
  EXPECT_TRUE(refused([](json& d) { d.erase("version"); }, "version: missing"));
}

TEST(PlanModel, MissingAndMistypedFieldsAreNamed) {
  // The file's index, as the file has it (layouts[2] is place 2).
  EXPECT_TRUE(
      refused([](json& d) { d["layouts"][2]["predicted"].erase("step_ms"); }, "layouts[2].predicted.step_ms: missing"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][2]["predicted"].erase("job_bytes"); },
                      "layouts[2].predicted.job_bytes: missing"));
  EXPECT_TRUE(refused([](json& d) { d.erase("layouts"); }, "layouts: missing"));
  EXPECT_TRUE(refused([](json& d) { d["profile"].erase("machine"); }, "profile.machine: missing"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][0]["memory"][1].erase("activations"); },
                      "layouts[0].memory[1].activations: missing"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][1]["measured"].erase("median_ms"); },
                      "layouts[1].measured.median_ms: missing"));
  EXPECT_TRUE(
      refused([](json& d) { d["layouts"][3]["measured"].erase("error"); }, "layouts[3].measured.error: missing"));
  EXPECT_TRUE(refused([](json& d) { d["ranks"] = "4"; }, "ranks: \"4\" (a string), expected an integer"));
  EXPECT_TRUE(refused([](json& d) { d["ranks"] = 4.5; }, "ranks: 4.5, expected an integer"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][2]["predicted"]["step_ms"] = "60"; },
                      "layouts[2].predicted.step_ms: \"60\" (a string), expected a number"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][2]["memory"] = json::object(); },
                      "layouts[2].memory: an object, expected an array"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"] = json::object(); }, "layouts: an object, expected an array"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][1] = 7; }, "layouts[1]: 7, expected an object"));
  EXPECT_TRUE(refused([](json& d) { d["profile"] = nullptr; }, "profile: null, expected an object"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][1]["measured"]["ok"] = "yes"; },
                      "layouts[1].measured.ok: \"yes\" (a string), expected true or false"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][1]["name"] = json::array(); },
                      "layouts[1].name: an array, expected a string"));
  EXPECT_TRUE(
      refused([](json& d) { d["layouts"][1]["measured"]["steps_ms"][1] = "x"; }, "layouts[1].measured.steps_ms[1]"));
  EXPECT_TRUE(refused([](json& d) { d["accepted"] = 18446744073709551615u; },
                      "accepted: 18446744073709551615, expected an integer below 2^63"));
}

TEST(PlanModel, ImpossibleValuesAreRefused) {
  EXPECT_TRUE(refused([](json& d) { d["layouts"][0]["memory"][1]["activations"] = -5; },
                      "layouts[0].memory[1].activations: -5 bytes (negative)"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][2]["predicted"]["job_bytes"] = -1; },
                      "layouts[2].predicted.job_bytes: -1 bytes (negative)"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][1]["measured"]["metered_bytes"] = -7; },
                      "metered_bytes: -7 bytes (negative)"));
  EXPECT_TRUE(
      refused([](json& d) { d["layouts"][1]["memory"] = json::array(); }, "layouts[1].memory: no pipeline ranks"));
  EXPECT_TRUE(
      refused([](json& d) { d["layouts"][2]["memory"].erase(0); }, "layouts[2].memory: 1 ranks for a pipeline of 2"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][2]["memory"][0]["pipeline_rank"] = 0; },
                      "layouts[2].memory[1].pipeline_rank: 0 again"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][2]["memory"][0]["pipeline_rank"] = 2; },
                      "layouts[2].memory[0].pipeline_rank: 2, expected at most 1"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][1]["place"] = 9; }, "layouts[1].place: 9 again (layouts[0] has it)"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][1]["place"] = 0; }, "layouts[1].place: 0, expected at least 1"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][1]["pipeline"] = 0; }, "layouts[1].pipeline: 0, expected at least 1"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][1]["measured"]["median_ms"] = 0; },
                      "layouts[1].measured.median_ms: 0, expected more than 0"));
  EXPECT_TRUE(refused([](json& d) { d["layouts"][1]["predicted"]["step_ms"] = -3.5; },
                      "layouts[1].predicted.step_ms: -3.5, expected at least 0"));
  EXPECT_TRUE(refused([](json& d) { d["ranks"] = 0; }, "ranks: 0, expected at least 1"));
  // What is optional: the device, the measurement, the scores; and a record
  // of no layouts at all.
  json doc = json::parse(kPlanJson);
  doc["profile"].erase("device");
  doc.erase("scores");
  doc["layouts"] = json::array();
  const PlanRecord empty = read_plan_text(doc.dump());
  EXPECT_TRUE(empty.layouts.empty());
  EXPECT_EQ(empty.profile.device, "");
  EXPECT_EQ(empty.summary(), "0 layouts, 0 measured");
}

TEST(PlanModel, FilesAreNamedInTheMessage) {
  const std::string good = testing_util::temp_path("plan_good.json");
  testing_util::write_text(good, kPlanJson);
  EXPECT_EQ(read_plan_file(good).layouts.size(), 6u);
  const std::string cut = testing_util::temp_path("plan_cut.json");
  testing_util::write_text(cut, kPlanJson.substr(0, kPlanJson.size() / 2));
  try {
    read_plan_file(cut);
    ADD_FAILURE() << "a cut-short file was read";
  } catch (const PlanFormatError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("plan " + cut + ": cut short", 0), 0u) << e.what();
  }
  try {
    read_plan_file(testing_util::temp_path("no_such_plan.json"));
    ADD_FAILURE() << "a missing file was read";
  } catch (const PlanFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be opened"), std::string::npos) << e.what();
  }
}

// A file dropped on the page is a plan when its JSON says so, from its
// first bytes on; a trace is told at once.
TEST(PlanModel, APlanRecordIsToldByItsFormat) {
  EXPECT_TRUE(looks_like_plan_record(kPlanJson));
  EXPECT_TRUE(looks_like_plan_record(kPlanJson.substr(0, 40)));  // "format" is its first key
  EXPECT_TRUE(looks_like_plan_record("{\"accepted\": 3, \"batch\": 20, \"format\": \"distlab-plan\", \"lay"));
  EXPECT_TRUE(looks_like_plan_record(" {\"profile\": {\"format\": \"x\"}, \"format\":\"distlab-plan\"}"));
  EXPECT_FALSE(looks_like_plan_record("{\"format\": \"distlab-pla"));  // not yet said
  EXPECT_FALSE(looks_like_plan_record("{\"format\": \"chrome\"}"));
  EXPECT_FALSE(looks_like_plan_record("{\"format\": 1, \"x\": \"distlab-plan\"}"));
  EXPECT_FALSE(looks_like_plan_record("{\"layouts\": [{\"format\": \"distlab-plan\"}]}"));  // not at the top
  EXPECT_FALSE(looks_like_plan_record("{\"traceEvents\": [], \"format\": \"distlab-plan\"}"));
  EXPECT_FALSE(looks_like_plan_record("[{\"format\": \"distlab-plan\"}]"));
  EXPECT_FALSE(looks_like_plan_record("this is not JSON"));
  EXPECT_FALSE(looks_like_plan_record(""));
  // A trace written by the library's sink.
  const std::string trace = testing_util::temp_path("plan_sniff_trace.json");
  testing_util::write_with_library(trace, {trace::Event{0, "compute", "forward", "fwd", 0, 10, 0, -1, 0, {}}});
  EXPECT_FALSE(looks_like_plan_record(testing_util::read_text(trace)));
}

}  // namespace
}  // namespace distlab::viz
