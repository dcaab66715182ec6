// The Wire panel's model: the rings of a trace's "shm ring S->D" counters,
// each ring's samples from both sides merged by time, what each sample
// draws (in flight, the arc's ends as turns of the ring, bytes moved)
// against values worked out by hand, and malformed samples skipped and
// counted by why. The options that choose a ring and a sample.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "options.hpp"
#include "wire_model.hpp"
#include "wire_samples.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

// Without a label, find() takes the pair's ring with the most bytes through
// it, not the one that began first (lesson 02's job communicator carries a
// few headers before part 3's route fills its ring).
TEST(WireModel, WithoutALabelTheBusiestRingOfThePair) {
  const WireModel model({ring_event(0, "0->1 (world aaaa)", 48, 48, kWireCapacity, 100),
                         ring_event(0, "0->1 (world bbbb)", 4096, 1024, kWireCapacity, 200),
                         ring_event(1, "0->1 (world bbbb)", 4096, 4096, kWireCapacity, 300),
                         ring_event(0, "0->1 (world cccc)", 96, 96, kWireCapacity, 400)});
  ASSERT_EQ(model.rings().size(), 3u);
  EXPECT_EQ(ring_label(model.rings()[0].id), "0->1 (world aaaa)");
  EXPECT_EQ(model.find({0, 1, ""}), 1);
  EXPECT_EQ(model.find({0, 1, "world cccc"}), 2);
}

TEST(WireModel, RingsSortedAndEachRingsSamplesMergedByTime) {
  const WireModel model(wire_events());
  // By S, then D; the pair 0->1's two communicators' rings in the order they began.
  ASSERT_EQ(model.rings().size(), 4u);
  EXPECT_EQ(ring_label(model.rings()[0].id), "0->1 (world d09c)");
  EXPECT_EQ(ring_label(model.rings()[1].id), "0->1 (world 59e2)");
  EXPECT_EQ(ring_label(model.rings()[2].id), "0->2");
  EXPECT_EQ(ring_label(model.rings()[3].id), "1->0");
  EXPECT_EQ(model.find({0, 1, ""}), 0) << "no label: the pair's busiest (the run's 5,000,000 bytes, not a header)";
  EXPECT_EQ(model.find({0, 1, "world 59e2"}), 1);
  EXPECT_EQ(model.find({0, 1, "world 0000"}), -1);
  EXPECT_EQ(model.find({1, 0, ""}), 3);
  EXPECT_EQ(model.find({2, 0, ""}), -1);
  ASSERT_EQ(model.rings()[1].samples.size(), 2u);
  EXPECT_EQ(model.rings()[1].samples[0].head, 48);
  EXPECT_EQ(model.skipped(), 0) << model.skipped_text();
  EXPECT_EQ(model.skipped_text(), "");
  EXPECT_EQ(model.origin_us(), 1010);

  // Shuffled in, sorted out: every sample of the run, in the run's order,
  // the sender's and the receiver's interleaved.
  const std::vector<RingStep> run = wire_run();
  const std::vector<WireSample>& got = model.rings()[0].samples;
  ASSERT_EQ(run.size(), 40u);
  ASSERT_EQ(got.size(), run.size());
  for (size_t k = 0; k < run.size(); ++k) {
    EXPECT_EQ(got[k].rank, run[k].rank) << "sample " << k + 1;
    EXPECT_EQ(got[k].head, run[k].head) << "sample " << k + 1;
    EXPECT_EQ(got[k].tail, run[k].tail) << "sample " << k + 1;
    EXPECT_EQ(got[k].capacity, kWireCapacity);
    EXPECT_EQ(got[k].at_us, run[k].at_us);
  }
  EXPECT_EQ(model.rings()[3].samples[0].rank, 1);
  EXPECT_EQ(model.rings()[3].samples[1].rank, 0);
}

TEST(WireModel, SamplesOfOneTimeKeepTheirOrder) {
  const std::vector<trace::Event> events = {
      ring_event(0, "0->1", 300, 0, 1000, 50), ring_event(1, "0->1", 300, 100, 1000, 20),
      ring_event(0, "0->1", 200, 100, 1000, 20), ring_event(1, "0->1", 300, 300, 1000, 20)};
  const WireModel model(events);
  ASSERT_EQ(model.rings().size(), 1u);
  const auto& s = model.rings()[0].samples;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].tail, 100);
  EXPECT_EQ(s[0].head, 300);
  EXPECT_EQ(s[1].head, 200);
  EXPECT_EQ(s[2].tail, 300);
  EXPECT_EQ(s[3].at_us, 50);
}

// The samples the story names, with their numbers worked out by hand.
TEST(WireModel, WhatEachSampleDraws) {
  const WireModel model(wire_events());
  const std::vector<WireSample>& s = model.rings().at(0).samples;
  ASSERT_EQ(s.size(), 40u);

  // Sample 3: three chunks written, none read.
  WireView v = wire_view(s[2]);
  EXPECT_EQ(v.occupied, 786'432);
  EXPECT_DOUBLE_EQ(v.fill, 0.375);
  EXPECT_DOUBLE_EQ(v.tail_turn, 0.0);
  EXPECT_DOUBLE_EQ(v.head_turn, 0.375);
  EXPECT_EQ(v.moved, 0);

  // Sample 8: full. Head is back at byte 0, where tail is, and the arc is the whole circle.
  v = wire_view(s[7]);
  EXPECT_EQ(s[7].head, 2'097'152);
  EXPECT_EQ(v.occupied, 2'097'152);
  EXPECT_DOUBLE_EQ(v.fill, 1.0);
  EXPECT_EQ(v.head_at, 0);
  EXPECT_EQ(v.tail_at, 0);
  EXPECT_DOUBLE_EQ(v.head_turn, v.tail_turn);

  // Sample 13: five chunks read: three in flight, from 5/8 of the ring to its end.
  v = wire_view(s[12]);
  EXPECT_EQ(s[12].rank, 1);
  EXPECT_EQ(v.occupied, 786'432);
  EXPECT_DOUBLE_EQ(v.tail_turn, 0.625);
  EXPECT_DOUBLE_EQ(v.head_turn, 0.0);
  EXPECT_EQ(v.moved, 1'310'720);

  // Sample 14: head past the capacity (2,359,296 B written) wraps to 1/8:
  // four chunks in flight from 5/8 across 12 o'clock to 1/8.
  v = wire_view(s[13]);
  EXPECT_EQ(s[13].head, 2'359'296);
  EXPECT_EQ(v.head_at, 262'144);
  EXPECT_EQ(v.tail_at, 1'310'720);
  EXPECT_EQ(v.occupied, 1'048'576);
  EXPECT_DOUBLE_EQ(v.fill, 0.5);
  EXPECT_DOUBLE_EQ(v.head_turn, 0.125);
  EXPECT_DOUBLE_EQ(v.tail_turn, 0.625);

  // Sample 39: the last chunk (19,264 B) written and all but it read.
  v = wire_view(s[38]);
  EXPECT_EQ(v.occupied, 19'264);
  EXPECT_EQ(v.moved, 4'980'736);

  // Sample 40: all read: empty, head and tail at 5,000,000 % 2,097,152.
  v = wire_view(s[39]);
  EXPECT_EQ(v.occupied, 0);
  EXPECT_DOUBLE_EQ(v.fill, 0.0);
  EXPECT_EQ(v.head_at, 805'696);
  EXPECT_EQ(v.tail_at, 805'696);
  EXPECT_DOUBLE_EQ(v.tail_turn, 805'696.0 / 2'097'152.0);
  EXPECT_EQ(v.moved, 5'000'000);

  // Every sample: a number in [0, 1] for each turn and the fill, no NaN.
  for (const WireSample& sample : s) {
    const WireView w = wire_view(sample);
    for (double x : {w.fill, w.head_turn, w.tail_turn}) {
      EXPECT_TRUE(std::isfinite(x));
      EXPECT_GE(x, 0.0);
      EXPECT_LE(x, 1.0);
    }
    EXPECT_LT(w.head_turn, 1.0);
    EXPECT_LT(w.tail_turn, 1.0);
  }
}

TEST(WireModel, MalformedSamplesAreSkippedAndCounted) {
  std::vector<trace::Event> events = wire_events();
  auto add = [&](int rank, const std::string& name, trace::CounterValues values) {
    events.push_back(trace::counter_event(rank, name, values, 1500));
  };
  add(0, "shm ring 0->1", {{"head", 10}, {"tail", 0}});                        // no capacity
  add(0, "shm ring 0->1", {{"tail", 0}, {"capacity", 100}});                   // no head
  add(0, "shm ring 0->1", {{"head", 10}, {"tail", 0}, {"capacity", 0}});       // capacity 0
  add(1, "shm ring 0->1", {{"head", 10}, {"tail", 0}, {"capacity", -8}});      // capacity below 0
  add(1, "shm ring 0->1", {{"head", 10}, {"tail", 11}, {"capacity", 100}});    // tail > head
  add(0, "shm ring 0->1", {{"head", 250}, {"tail", 100}, {"capacity", 100}});  // 150 in flight > 100
  add(0, "shm ring 0->1", {{"head", -5}, {"tail", -9}, {"capacity", 100}});    // negative
  add(5, "shm ring 0->1", {{"head", 10}, {"tail", 0}, {"capacity", 100}});     // rank 5 is neither end
  add(0, "shm ring 0-1", {{"head", 10}, {"tail", 0}, {"capacity", 100}});      // not S->D
  add(0, "shm ring 1->1", {{"head", 10}, {"tail", 0}, {"capacity", 100}});     // a ring to itself
  add(0, "shm ring 0->1 world", {{"head", 10}, {"tail", 0}, {"capacity", 100}});  // a label not in parentheses
  add(0, "shm ring 0->1 (world d09c)", {{"head", 10}, {"tail", 0}, {"capacity", 100}});
  events.back().args[0].second = "10x";  // head not a number

  const WireModel model(events);
  EXPECT_EQ(model.skipped(WireFault::kMissingSeries), 2);
  EXPECT_EQ(model.skipped(WireFault::kNoCapacity), 2);
  EXPECT_EQ(model.skipped(WireFault::kTailPastHead), 1);
  EXPECT_EQ(model.skipped(WireFault::kOverfull), 1);
  EXPECT_EQ(model.skipped(WireFault::kNegative), 1);
  EXPECT_EQ(model.skipped(WireFault::kWrongRank), 1);
  EXPECT_EQ(model.skipped(WireFault::kBadName), 3);
  EXPECT_EQ(model.skipped(WireFault::kNotANumber), 1);
  EXPECT_EQ(model.skipped(), 12);
  EXPECT_EQ(model.skipped_text(),
            "12 samples skipped: 3 name not \"shm ring S->D (LABEL)\", 2 missing series, 1 not a number, "
            "1 rank neither S nor D, 1 negative head or tail, 2 capacity 0, 1 tail > head, 1 head - tail > capacity");
  // The good samples are all there, and nothing else.
  ASSERT_EQ(model.rings().size(), 4u);
  EXPECT_EQ(model.rings()[0].samples.size(), 40u);
  for (const WireSample& s : model.rings()[0].samples) EXPECT_NE(s.at_us, 1500);

  const WireModel one({ring_event(0, "0->1", 10, 20, 100, 0)});
  EXPECT_TRUE(one.empty());
  EXPECT_EQ(one.skipped_text(), "1 sample skipped: 1 tail > head");
}

TEST(WireModel, RingNames) {
  ASSERT_TRUE(parse_ring_id("0->1"));
  EXPECT_EQ(parse_ring_id("0->1")->from, 0);
  EXPECT_EQ(parse_ring_id("0->1")->to, 1);
  EXPECT_EQ(parse_ring_id("0->1")->label, "");
  ASSERT_TRUE(parse_ring_id(" 3 -> 12 "));
  EXPECT_EQ(ring_label(*parse_ring_id(" 3 -> 12 ")), "3->12");
  const std::optional<RingId> labelled = parse_ring_id("2->0 (group tp 1f2e)");
  ASSERT_TRUE(labelled);
  EXPECT_EQ(labelled->from, 2);
  EXPECT_EQ(labelled->to, 0);
  EXPECT_EQ(labelled->label, "group tp 1f2e");
  EXPECT_EQ(ring_label(*labelled), "2->0 (group tp 1f2e)");
  for (const char* bad : {"", "0-1", "0->", "->1", "a->b", "1->1", "-1->2", "+1->2", "0->1->2", "1.5->2", "0->1 world",
                          "0->1 (world", "0->1 ()", "0->(x)", "0->1 (a) b"})
    EXPECT_FALSE(parse_ring_id(bad)) << bad;
}

TEST(WireModel, OptionsChooseTheRingAndTheSample) {
  Options o;
  const char* argv[] = {"distlab-viz", "--panel", "wire", "--wire-ring", "2->3", "--wire-sample", "7"};
  ASSERT_FALSE(parse_options(7, argv, o).has_value());
  EXPECT_EQ(o.panel, "wire");
  EXPECT_EQ(o.wire_ring, "2->3");
  EXPECT_EQ(o.wire_sample, 7);
  const char* labelled[] = {"distlab-viz", "--panel", "wire", "--wire-ring", "0->1 (world d09c)"};
  ASSERT_FALSE(parse_options(5, labelled, o).has_value());
  EXPECT_EQ(o.wire_ring, "0->1 (world d09c)");

  Options bad;
  const char* ring[] = {"distlab-viz", "--panel", "wire", "--wire-ring", "2-3"};
  EXPECT_EQ(parse_options(5, ring, bad), 2);
  const char* sample[] = {"distlab-viz", "--panel", "wire", "--wire-sample", "-1"};
  EXPECT_NE(parse_options(5, sample, bad), std::nullopt);
}

}  // namespace
}  // namespace distlab::viz
