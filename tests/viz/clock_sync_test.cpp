// Two launchers acting as two nodes, the second with its trace clock moved
// 7 s back (DISTLAB_TRACE_CLOCK_SHIFT_US, a machine whose clock is
// unrelated): the offset rank 1 measures at start-up is the injected one
// within the uncertainty it states, distlab-trace merge and the visualizer
// apply it, and no arrow goes backwards.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "live_feed.hpp"
#include "support/free_port.hpp"
#include "trace/reader.hpp"
#include "trace_loader.hpp"
#include "trace_model.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;
using test_support::free_port;

constexpr int64_t kShiftUs = -7'000'000;
constexpr int kWaitMs = 120000;

// Node `node` of two (distlab-run, one rank each) running lesson 05 on gloo.
std::vector<std::string> node_of_lesson_05(int node, const std::string& port, const std::vector<std::string>& extra) {
  std::vector<std::string> argv{VIZ_DISTLAB_RUN, "--nnodes", "2", "--node-rank", std::to_string(node),
                                "--nproc-per-node", "1", "--master-port", port, "--", VIZ_LESSON_05,
                                "--backend", "gloo", "--mb", "0.25", "--no-steps"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// Three ranks of one launcher: one machine, one clock. Each writes offset
// 0 with no uncertainty (a ping-pong on a loaded machine would state
// hundreds of microseconds and move the ranks apart by that much), and every
// recv ends after its send began, without any correction.
TEST(ClockSync, RanksOfOneMachineKeepRankZerosClock) {
  const std::string pattern = temp_path("one_machine.rank{rank}.json");
  const std::string out = temp_path("one_machine.txt");
  const pid_t job = spawn({VIZ_DISTLAB_RUN, "--nproc-per-node", "3", "--master-port", "0", "--", VIZ_LESSON_05,
                           "--backend", "gloo", "--mb", "0.25", "--no-steps", "--iters", "2", "--trace", pattern},
                          {}, out);
  ASSERT_GT(job, 0);
  ASSERT_EQ(wait_exit(job, kWaitMs), 0) << read_text(out);
  std::vector<trace::Event> all;
  for (int rank = 0; rank < 3; ++rank) {
    trace::TraceInfo info;
    const auto events = trace::read_chrome_trace(temp_path("one_machine.rank" + std::to_string(rank) + ".json"), {}, &info);
    ASSERT_EQ(info.clock_offsets.count(rank), 1u) << "rank " << rank;
    EXPECT_EQ(info.clock_offsets.at(rank).offset_us, 0) << "rank " << rank;
    EXPECT_EQ(info.clock_offsets.at(rank).uncertainty_us, 0) << "rank " << rank;
    all.insert(all.end(), events.begin(), events.end());
  }
  std::map<uint64_t, int64_t> send_begin;
  for (const auto& e : all)
    if (e.category == "send" && e.flow != 0) send_begin[e.flow] = e.begin_us;
  size_t pairs = 0;
  for (const auto& e : all)
    if (e.category == "recv" && send_begin.count(e.flow)) {
      ++pairs;
      EXPECT_GE(e.end_us, send_begin[e.flow]) << "a recv ended before its send began";
    }
  EXPECT_GT(pairs, 10u);
}

TEST(ClockSync, OffsetBetweenTwoNodesIsMeasuredAndApplied) {
  const std::string pattern = temp_path("nodes.rank{rank}.json");
  const std::string port = std::to_string(free_port());
  auto launcher = [&](int node) { return node_of_lesson_05(node, port, {"--iters", "2", "--trace", pattern}); };
  const std::string out0 = temp_path("node0.txt"), out1 = temp_path("node1.txt");
  const pid_t node0 = spawn(launcher(0), {}, out0);
  const pid_t node1 = spawn(launcher(1), {"DISTLAB_TRACE_CLOCK_SHIFT_US=" + std::to_string(kShiftUs)}, out1);
  ASSERT_GT(node0, 0);
  ASSERT_GT(node1, 0);
  const int code0 = wait_exit(node0, kWaitMs), code1 = wait_exit(node1, kWaitMs);
  ASSERT_EQ(code0, 0) << read_text(out0);
  ASSERT_EQ(code1, 0) << read_text(out1);
  const std::string rank0 = temp_path("nodes.rank0.json"), rank1 = temp_path("nodes.rank1.json");

  // Rank 1 measured rank 0's clock 7 s ahead of its own.
  trace::TraceInfo info0, info1;
  const auto raw0 = trace::read_chrome_trace(rank0, {}, &info0);
  const auto raw1 = trace::read_chrome_trace(rank1, {}, &info1);
  ASSERT_EQ(info1.clock_offsets.count(1), 1u);
  const trace::ClockOffset measured = info1.clock_offsets.at(1);
  std::printf("rank 1: offset %lld us +- %lld us (injected %lld us)\n", static_cast<long long>(measured.offset_us),
              static_cast<long long>(measured.uncertainty_us), static_cast<long long>(-kShiftUs));
  EXPECT_LE(std::llabs(measured.offset_us - (-kShiftUs)), measured.uncertainty_us);
  EXPECT_LT(measured.uncertainty_us, 50'000);  // a round trip on one machine: well under 0.1 s
  EXPECT_EQ(info0.clock_offsets.at(0).offset_us, 0);

  // Raw, the arrows into rank 1 would end seconds before they start.
  std::map<uint64_t, int64_t> send_begin;
  for (const auto* events : {&raw0, &raw1})
    for (const auto& e : *events)
      if (e.category == "send" && e.flow != 0) send_begin[e.flow] = e.begin_us;
  size_t raw_backwards = 0, pairs = 0;
  for (const auto* events : {&raw0, &raw1})
    for (const auto& e : *events)
      if (e.category == "recv" && send_begin.count(e.flow)) {
        ++pairs;
        raw_backwards += e.end_us < send_begin[e.flow];
      }
  ASSERT_GT(pairs, 0u);
  EXPECT_GT(raw_backwards, 0u);

  // distlab-trace merge: every arrow goes forwards.
  const std::string merged = temp_path("nodes.merged.json");
  std::string output;
  ASSERT_EQ(run({VIZ_DISTLAB_TRACE, "merge", "-o", merged, rank0, rank1}, {}, &output), 0) << output;
  const nlohmann::json doc = nlohmann::json::parse(read_text(merged));
  std::map<std::string, std::pair<int64_t, int64_t>> flows;
  for (const auto& e : doc["traceEvents"]) {
    if (e.at("ph") == "s") flows[e.at("id").get<std::string>()].first = e.at("ts").get<int64_t>();
    if (e.at("ph") == "f") flows[e.at("id").get<std::string>()].second = e.at("ts").get<int64_t>();
  }
  ASSERT_EQ(flows.size(), pairs);
  for (const auto& [id, ts] : flows) EXPECT_LE(ts.first, ts.second) << id;

  // The visualizer: the same offset applied. A recv may still end a little
  // before its send began, but only by what the offset's uncertainty allows
  // (on one machine a recv ends microseconds after the send starts); those
  // arrows end at the send.
  TraceModel model;
  load_trace_into(rank0, model);
  load_trace_into(rank1, model);
  model.finalize();
  EXPECT_EQ(model.flow_count(), pairs);
  size_t clamped = 0;
  for (const FlowBundle& b : model.flow_bundles())
    for (const FlowLink& link : b.links) {
      const int64_t send = model.record(link.send).begin_us;
      const int64_t recv_end = model.record(link.recv).end_us;
      EXPECT_GE(model.arrival_us(link), send);
      EXPECT_LE(send - recv_end, measured.uncertainty_us);
      clamped += recv_end < send;
    }
  EXPECT_EQ(clamped, model.clamped_flow_count());
  EXPECT_LT(clamped, raw_backwards);
  std::printf("%zu send->recv pairs: %zu backwards in raw times, %zu within the uncertainty after the offset\n", pairs,
              raw_backwards, clamped);
}

// The same two nodes streaming live to one visualizer: rank 1 announces
// its measured offset on its stream before its first event, and the
// receiver moves rank 1's events into rank 0's clock, so the live view
// holds, event for event, what the two files hold once read with their
// offsets applied.
TEST(ClockSync, LiveEventsArriveInRankZerosClock) {
  LiveFeed feed(0, "127.0.0.1");
  const std::string live = "127.0.0.1:" + std::to_string(feed.port());
  const std::string pattern = temp_path("live_nodes.rank{rank}.json");
  const std::string port = std::to_string(free_port());
  auto launcher = [&](int node) {
    return node_of_lesson_05(node, port, {"--iters", "1", "--trace", pattern, "--live", live});
  };
  const std::string out0 = temp_path("live_node0.txt"), out1 = temp_path("live_node1.txt");
  const pid_t node0 = spawn(launcher(0), {}, out0);
  const pid_t node1 = spawn(launcher(1), {"DISTLAB_TRACE_CLOCK_SHIFT_US=" + std::to_string(kShiftUs)}, out1);
  ASSERT_GT(node0, 0);
  ASSERT_GT(node1, 0);
  ASSERT_EQ(wait_exit(node0, kWaitMs), 0) << read_text(out0);
  ASSERT_EQ(wait_exit(node1, kWaitMs), 0) << read_text(out1);

  std::vector<LoadedTrace> files;  // offsets applied by the file reader
  for (int rank = 0; rank < 2; ++rank)
    files.push_back(load_trace_file(temp_path("live_nodes.rank" + std::to_string(rank) + ".json")));
  const size_t total = files[0].events.size() + files[1].events.size();
  ASSERT_GT(files[1].events.size(), 0u);
  EXPECT_EQ(feed.wait_for(total, kWaitMs), total);

  const auto offsets = feed.clock_offsets();
  ASSERT_EQ(offsets.count(1), 1u);
  EXPECT_LE(std::llabs(offsets.at(1).offset_us - (-kShiftUs)), offsets.at(1).uncertainty_us);
  EXPECT_EQ(offsets.at(0).offset_us, 0);

  TraceModel model;
  feed.poll(model);
  ASSERT_EQ(model.size(), total);
  // Each rank's events arrive in the order its file holds them.
  std::vector<std::vector<trace::Event>> live_by_rank(2);
  for (uint32_t i = 0; i < model.size(); ++i) {
    const trace::Event e = model.event(i);
    ASSERT_TRUE(e.rank == 0 || e.rank == 1) << describe(e);
    live_by_rank[static_cast<size_t>(e.rank)].push_back(e);
  }
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(live_by_rank[static_cast<size_t>(rank)].size(), files[static_cast<size_t>(rank)].events.size());
    for (size_t k = 0; k < live_by_rank[static_cast<size_t>(rank)].size(); ++k)
      expect_same_event(live_by_rank[static_cast<size_t>(rank)][k], files[static_cast<size_t>(rank)].events[k]);
  }
  EXPECT_TRUE(feed.errors().empty());
}

}  // namespace
}  // namespace distlab::viz
