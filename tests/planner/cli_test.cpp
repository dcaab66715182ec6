// distlab-plan as a program: bad input is one line on stderr and a non-zero
// exit; --measure on the tiny preset runs every layout it chose, reports
// one made to fail on purpose with its error and goes on, and prints the
// error columns (their size is the benchmark's business, not this test's).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "data/corpus.hpp"
#include "planner/memory_model.hpp"
#include "planner/profile.hpp"
#include "train/run_command.hpp"

namespace distlab::planner {
namespace {

using train::testing::run_command;

// A profile written here, by hand (a datasheet's numbers, not this machine's).
std::string hand_profile_file() {
  Profile p;
  p.date = "2026-11-28";
  p.machine = "by hand";
  p.libtorch = "1.13.0";
  p.cores = 2;
  p.matmul = {{35, 32, 96, "fp32", 1e9}, {350, 32, 96, "fp32", 3e9}, {35, 32, 96, "bf16", 5e8}};
  p.elementwise_bytes_per_second = 4e9;
  p.op_seconds = 5e-6;
  p.links = {{"threads", "p2p", 2, {2e-5, 3e-10}}};
  p.sharing = {{1, 1.0}, {2, 1.05}, {4, 2.1}};
  const std::string path = (std::filesystem::temp_directory_path() / "planner_cli_profile.json").string();
  write_profile(p, path);
  return path;
}

std::string plan(const std::string& args, const std::string& corpus = "--vocab 100") {
  return std::string(DISTLAB_PLAN) + " --profile " + hand_profile_file() + " " + corpus + " " + args;
}

// The last line of `output`, which must be the only one on stderr.
void expect_one_line_refusal(const std::string& args, const std::string& expected) {
  const auto outcome = run_command(plan(args) + " 2>&1 >/dev/null", 60);
  EXPECT_NE(outcome.status, 0) << args;
  EXPECT_EQ(std::count(outcome.output.begin(), outcome.output.end(), '\n'), 1) << outcome.output;
  EXPECT_NE(outcome.output.find("distlab-plan: "), std::string::npos) << outcome.output;
  EXPECT_NE(outcome.output.find(expected), std::string::npos) << "expected '" << expected << "' in " << outcome.output;
}

TEST(PlanCli, BadInputIsOneLineNamingWhatIsWrong) {
  // 23 ranks of the tiny preset (2 layers, 2 heads, 20 columns), keeping
  // the matmuls: 23 stages, 23 tensor ranks, 23 replicas, or 23 context
  // ranks (whose cut layers cannot keep the whole layer's products): every
  // layout breaks a rule.
  expect_one_line_refusal("--preset tiny --ranks 23 --recompute matmuls", "no layout of the tiny preset runs on 23 ranks");
  expect_one_line_refusal("--preset huge --ranks 4", "unknown preset 'huge'");
  expect_one_line_refusal("--preset tiny --ranks 4 --memory-per-rank 1KB", "no layout fits 1.0 KB per rank");
  expect_one_line_refusal("--preset tiny --ranks 4 --memory-per-rank lots", "'lots' is not a size");
  const std::string broken = (std::filesystem::temp_directory_path() / "planner_cli_broken.json").string();
  std::ofstream(broken) << "{\"format\": \"distlab-profile\", \"version\": 7}";
  const auto outcome = run_command(std::string(DISTLAB_PLAN) + " --profile " + broken + " --vocab 100 2>&1", 60);
  EXPECT_NE(outcome.status, 0);
  EXPECT_EQ(outcome.output, "distlab-plan: profile " + broken +
                                ": profile version 7, this distlab-plan reads version 2 (run distlab-plan calibrate "
                                "again)\n");
}

TEST(PlanCli, MeasureRunsEachLayoutSurvivesAFailureAndPrintsTheErrors) {
  const std::string record = (std::filesystem::temp_directory_path() / "planner_cli_record.json").string();
  std::filesystem::remove(record);
  const auto outcome = run_command(
      plan("--preset tiny --ranks 2 --microbatches 2 --recompute none --precision fp32 --top 3 --measure 1 "
           "--fail-one --warmup 1 --steps 2 --timeout 120 --record " + record + " --capstone " LESSON_11,
           "--data " DISTLAB_SOURCE_DIR "/datasets/austen"),
      600);
  ASSERT_EQ(outcome.status, 0) << outcome.output;
  const std::string& out = outcome.output;
  EXPECT_NE(out.find("measuring 2 layouts"), std::string::npos) << out;
  EXPECT_NE(out.find("--chunks 0 (on purpose): failed, as it should"), std::string::npos) << out;
  // The failed row names lesson 11's own complaint; the others ran.
  EXPECT_TRUE(std::regex_search(out, std::regex("failed: .*--chunks"))) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '%') > 0, true);
  EXPECT_TRUE(std::regex_search(out, std::regex("2 layouts ran: step time error mean [0-9.]+%, worst [0-9.]+%; "
                                                "Spearman -?[0-9.]+; regret [0-9.]+%")))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("memory error mean [0-9.]+%, worst [0-9.]+%"))) << out;

  // The record (--record): the top 3 and the one drawn at random, the two
  // that ran with their steps, and scores that are the steps' own.
  std::ifstream file(record);
  ASSERT_TRUE(file) << record;
  const nlohmann::json plan = nlohmann::json::parse(file);
  EXPECT_EQ(plan.at("format"), "distlab-plan");
  EXPECT_EQ(plan.at("ranks"), 2);
  std::vector<double> errors;
  int places_in_order = 0, last_place = 0;
  for (const auto& layout : plan.at("layouts")) {
    places_in_order += layout.at("place").get<int>() > last_place ? 1 : 0;
    last_place = layout.at("place").get<int>();
    ASSERT_FALSE(layout.at("memory").empty());
    int64_t job = 0;
    for (const auto& rank : layout.at("memory")) job += rank.at("total").get<int64_t>();
    EXPECT_EQ(layout.at("predicted").at("job_bytes").get<int64_t>(), job * 2 / layout.at("pipeline").get<int64_t>());
    if (!layout.contains("measured")) continue;
    const auto& m = layout.at("measured");
    ASSERT_TRUE(m.at("ok").get<bool>()) << m.dump() << " (the one made to fail is not the layout's own run)";
    std::vector<double> steps = m.at("steps_ms").get<std::vector<double>>();
    ASSERT_EQ(steps.size(), 2u);
    std::sort(steps.begin(), steps.end());
    EXPECT_DOUBLE_EQ(m.at("median_ms").get<double>(), steps[1]);  // the upper middle of two
    // The printed row shows the same measurement.
    EXPECT_NE(out.find(layout.at("name").get<std::string>()), std::string::npos);
    const double predicted = layout.at("predicted").at("step_ms"), measured = m.at("median_ms");
    errors.push_back(std::abs(predicted - measured) / measured);
  }
  EXPECT_EQ(places_in_order, int(plan.at("layouts").size()));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NEAR(plan.at("scores").at("mean_abs_error").get<double>(), (errors[0] + errors[1]) / 2, 1e-9);
  EXPECT_NEAR(plan.at("scores").at("worst_abs_error").get<double>(), std::max(errors[0], errors[1]), 1e-9);
}

// A profile of GPUs from their datasheet (planner/profiles): the tutorial
// preset on 4 GPUs, each layout a distlab-run command with NCCL; fp16 is a
// GPU's precision, but its activations' bytes are not derived: refused, as
// measuring is (it runs thread ranks here).
TEST(PlanCli, ADatasheetProfilePredictsGpusAndPrintsTheirCommands) {
  const std::string profile = DISTLAB_SOURCE_DIR "/planner/profiles/h200-datasheet.json";
  const auto outcome = run_command(std::string(DISTLAB_PLAN) + " --profile " + profile +
                                       " --preset tutorial --ranks 4 --vocab 1000 --precision bf16 --top 3 2>&1",
                                   120);
  ASSERT_EQ(outcome.status, 0) << outcome.output;
  const std::string& out = outcome.output;
  EXPECT_NE(out.find("on 4 GPUs (a process each, NCCL)"), std::string::npos) << out;
  EXPECT_NE(out.find("distlab-run --nproc-per-node 4 -- lesson_11_capstone --backend nccl --preset tutorial"),
            std::string::npos)
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(" bf16 +[0-9.]+ "))) << out;
  const auto fp16 = run_command(std::string(DISTLAB_PLAN) + " --profile " + profile +
                                    " --preset tutorial --ranks 4 --vocab 1000 --precision fp16 2>&1 >/dev/null",
                                60);
  EXPECT_NE(fp16.status, 0);
  EXPECT_NE(fp16.output.find("--precision fp16: its activations' bytes are not derived"), std::string::npos)
      << fp16.output;
  const auto measured = run_command(std::string(DISTLAB_PLAN) + " --profile " + profile +
                                        " --preset tutorial --ranks 4 --vocab 1000 --measure 1 2>&1 >/dev/null",
                                    60);
  EXPECT_NE(measured.status, 0);
  EXPECT_EQ(std::count(measured.output.begin(), measured.output.end(), '\n'), 1) << measured.output;
  EXPECT_NE(measured.output.find("is of GPUs: run the commands it ranks on them"), std::string::npos)
      << measured.output;
}

// The capstone's --meter-memory line: one for the process's thread ranks,
// at least the float32 parameters and their gradients the run's own
// parameter count gives (8 bytes each: SGD keeps no state).
TEST(PlanCli, TheCapstonesMeteredPeakHoldsItsParametersAndGradients) {
  const auto outcome = run_command(std::string(LESSON_11) + " --backend threads --pipeline 1 --replicas 2 --preset tiny "
                                   "--epochs 1 --batches-per-epoch 2 --eval-batches 1 --meter-memory --data "
                                   DISTLAB_SOURCE_DIR "/datasets/austen 2>&1", 300);
  ASSERT_EQ(outcome.status, 0) << outcome.output;
  const std::string& out = outcome.output;
  std::smatch parameters, peak;
  ASSERT_TRUE(std::regex_search(out, parameters, std::regex("Total parameters in model: ([0-9,]+)"))) << out;
  ASSERT_TRUE(std::regex_search(out, peak, std::regex(
      "\\[RANK 0\\]: memory: peak ([0-9]+) bytes allocated on the CPU \\(the allocator meter, every rank of this process\\)")))
      << out;
  std::string digits = parameters[1];
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  const int64_t count = std::stoll(digits);
  EXPECT_GE(std::stoll(peak[1]), 2 * 8 * count) << "two replicas' parameters and gradients: " << out;
  EXPECT_EQ(out.find("memory: peak", out.find("memory: peak") + 1), std::string::npos) << "one line: " << out;
}

// One rank's whole peak, predicted by category, against the allocator
// meter's count of the capstone running that layout (one rank: no other
// rank peaks apart from it): within 1 % for float32 and bf16, with and
// without recomputation, one microbatch and two. The last stage's loss
// gradient and the corpus's batches are a fifth and a tenth of it.
TEST(PlanCli, OneRanksPredictedPeakIsTheMetersWithinOnePercent) {
  const data::Corpus corpus = data::load_corpus(DISTLAB_SOURCE_DIR "/datasets/austen");
  ModelShape model = model_shape("tiny", static_cast<int64_t>(corpus.vocab.size()));
  model.train_tokens = corpus.train.numel();
  model.valid_tokens = corpus.valid.numel();
  model.test_tokens = corpus.test.numel();
  for (const auto& [precision, recompute, microbatches] :
       {std::make_tuple(memory::Precision::kFp32, memory::Recompute::kNone, 1),
        std::make_tuple(memory::Precision::kBf16, memory::Recompute::kFull, 2)}) {
    Choice c;
    c.layout = train::Layout{1, 1, 1, 1};
    c.pipeline.microbatches = microbatches;
    c.memory.precision = precision;
    c.memory.recompute = recompute;
    const RankMemory predicted = predict_memory(model, c).worst();
    std::string command = capstone_command(model, c);
    command.replace(0, command.find(' '), LESSON_11);
    const auto outcome = run_command(command + " --epochs 1 --batches-per-epoch 4 --eval-batches 1 --stop-after 3 "
                                     "--meter-memory --data " DISTLAB_SOURCE_DIR "/datasets/austen 2>&1", 300);
    ASSERT_EQ(outcome.status, 0) << outcome.output;
    std::smatch peak;
    ASSERT_TRUE(std::regex_search(outcome.output, peak, std::regex("memory: peak ([0-9]+) bytes allocated")))
        << outcome.output;
    const double measured = std::stod(peak[1]);
    EXPECT_NEAR(double(predicted.total()), measured, 0.01 * measured) << command;
    EXPECT_GT(predicted.backward_scratch, predicted.total() / 5) << command;
    EXPECT_GT(predicted.data, predicted.total() / 30) << command;
  }
}

}  // namespace
}  // namespace distlab::planner
