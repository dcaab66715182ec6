// How lessons 03-05 put algorithms side by side: one row per algorithm,
// the cost model's prediction (for the story's link, and for the link
// measured here with --calibrate) beside the measured time and the number
// of elements that came out wrong.
//
//   algorithm  steps  max in/out  story  predicted here  measured  [algbw  busbw]  #wrong
//
// "max in/out": the most bytes one rank sends or receives over the whole
// collective (the root's port in a sequential broadcast or reduce).
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>

#include "story.hpp"
#include "timing.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/plan.hpp"

namespace distlab::lessons {

// 5e6 -> "5.00 MB"
inline std::string format_megabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MB", bytes / 1e6);
  return text;
}

// The most bytes one rank sends or receives over the whole plan.
inline int64_t busiest_port_bytes(const collectives::Plan& plan) {
  int64_t most = 0;
  for (int r = 0; r < plan.world_size; ++r) most = std::max({most, plan.bytes_sent_by(r), plan.bytes_received_by(r)});
  return most;
}

class AlgorithmTable {
 public:
  // One collective on p ranks over `count` elements of `elem_bytes` bytes.
  // bandwidth: add algbw and busbw columns (nccl-tests' definitions).
  AlgorithmTable(collectives::Collective collective, int world_size, int64_t count, int elem_bytes, int root,
                 Links links, bool bandwidth)
      : collective_(collective), p_(world_size), count_(count), elem_bytes_(elem_bytes), root_(root),
        links_(links), bandwidth_(bandwidth) {}

  void print_header() const {
    std::printf("  %-17s %5s %11s %9s %15s %11s", "algorithm", "steps", "max in/out", "story", "predicted here",
                "measured");
    if (bandwidth_) std::printf(" %12s %12s", "algbw(GB/s)", "busbw(GB/s)");
    std::printf(" %7s\n", "#wrong");
  }

  // Native has no plan: its prediction columns are "-".
  void print_row(collectives::Algorithm algorithm, double measured_s, int64_t wrong) const {
    std::string steps = "-", sent = "-", story = "-", here = "-";
    if (algorithm != collectives::Algorithm::kNative) {
      const auto plan = collectives::make_plan(collective_, algorithm, p_, count_, root_, elem_bytes_);
      steps = std::to_string(plan.steps.size());
      sent = format_megabytes(static_cast<double>(busiest_port_bytes(plan)));
      story = format_seconds(collectives::predict(plan, links_.story).total_seconds);
      if (links_.here) here = format_seconds(collectives::predict(plan, *links_.here).total_seconds);
    }
    std::printf("  %-17s %5s %11s %9s %15s %11s", collectives::to_string(algorithm), steps.c_str(), sent.c_str(),
                story.c_str(), here.c_str(), format_seconds(measured_s).c_str());
    if (bandwidth_) {
      // algbw: the buffer's bytes per second. busbw: algbw times the factor
      // that makes it comparable to one link's speed whatever p is (2(p-1)/p
      // for all-reduce, 1 for broadcast and reduce).
      const double algbw = static_cast<double>(count_) * elem_bytes_ / measured_s / 1e9;
      std::printf(" %12.3f %12.3f", algbw, algbw * collectives::bus_bandwidth_factor(collective_, p_));
    }
    std::printf(" %7lld\n", static_cast<long long>(wrong));
  }

 private:
  collectives::Collective collective_;
  int p_;
  int64_t count_;
  int elem_bytes_;
  int root_;
  Links links_;
  bool bandwidth_;
};

// The steps of a plan as arrows, one line per step, with the story's time;
// the chunk each message carries, and the phase where a plan has several.
//      step 1 (5.0 s): 1->0  3->2  5->4  7->6
//      step 1 (1.0 s) reduce-scatter: 0->1 c3  1->2 c0  2->3 c1  3->0 c2
inline void print_plan_steps(const collectives::Plan& plan, const collectives::LinkParams& link) {
  const auto prediction = collectives::predict(plan, link);
  bool phases = false;  // name the phase only where there is more than one
  for (const auto& step : plan.steps) phases = phases || step.phase != plan.steps.front().phase;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const auto& step = plan.steps[s];
    std::string arrows;
    for (const auto& t : step.transfers) {
      if (!arrows.empty()) arrows += "  ";
      arrows += std::to_string(t.src) + "->" + std::to_string(t.dst);
      if (t.chunk >= 0) arrows += " c" + std::to_string(t.chunk);
      if (t.chunks > 1) arrows += "-" + std::to_string(t.chunk + t.chunks - 1);
    }
    const std::string phase = phases ? " " + step.phase : "";
    std::printf("      step %zu (%s)%s: %s\n", s + 1, format_seconds(prediction.step_seconds[s]).c_str(),
                phase.c_str(), arrows.c_str());
  }
}

// The story as the cost model tells it: each algorithm of `collective` on
// `bytes` over the story's link, and with show_steps each step's messages.
//   tree               3 steps, 15.0 s, at most 15.00 MB in or out of one rank
//       step 1 (5.0 s): 0->1
inline void print_story(collectives::Collective collective, int p, int64_t bytes, int root,
                        const collectives::LinkParams& link, bool show_steps) {
  for (collectives::Algorithm algorithm : collectives::algorithms_for(collective)) {
    const auto plan = collectives::make_plan(collective, algorithm, p, bytes, root, /*elem_bytes=*/1);
    std::printf("  %-17s %2zu steps, %s, at most %s in or out of one rank\n", collectives::to_string(algorithm),
                plan.steps.size(), format_seconds(collectives::predict(plan, link).total_seconds).c_str(),
                format_megabytes(static_cast<double>(busiest_port_bytes(plan))).c_str());
    if (show_steps) print_plan_steps(plan, link);
  }
}

}  // namespace distlab::lessons
