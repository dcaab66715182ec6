// The Memory panel: what each rank holds under DDP and each ZeRO stage,
// measured, beside what the ZeRO paper says it should hold.
//
// For every stage in the trace (in the order they first appear), per rank,
// two stacked bars (memory_model.hpp):
//   measured  the rank's peak sample of that stage, solid colours
//   formula   the stage's accounting for that rank, the same colours paler
// Parameters, gradients, optimizer state, buffers and activations from the
// bottom up. Every bar is drawn to one scale, so each stage's saving reads
// as the drop in height from DDP's bars. Hover a bar for its bytes; the
// table under the chart lists every bar's total.
//
//   +-------------------------------------------------------------+
//   | legend: [] parameters [] gradients [] optimizer state ...    |
//   | 400 MB -|  ##                                                |
//   |         |  ##::  ##::  ##::  ##::     ##                     |
//   |   0 B  -+--##::--##::--##::--##::-----##::--##::--...        |
//   |           r0    r1    r2    r3        r0    r1               |
//   |                 DDP                        ZeRO-1            |
//   +-------------------------------------------------------------+
#pragma once

#include <imgui.h>

#include <array>
#include <string>
#include <vector>

#include "colors.hpp"
#include "memory_model.hpp"
#include "options.hpp"

namespace distlab::viz {

// Series s of kMemorySeries: its colour in a measured bar, and in a formula's.
Color memory_series_color(int series);
Color memory_formula_color(int series);

// What the last frame drew where, for the tests and the tooltips.
struct MemoryBar {
  std::string stage;
  int rank = 0;
  MemoryKind kind = MemoryKind::kMeasured;
  MemorySample sample;
  float x0 = 0.0f;
  float x1 = 0.0f;
  // Each series' segment: from segment_bottom[s] up to segment_top[s]
  // (screen y grows downwards, so top < bottom; equal when the series is 0).
  std::array<float, kMemorySeriesCount> segment_bottom{};
  std::array<float, kMemorySeriesCount> segment_top{};
};

struct MemoryFrameLayout {
  bool drawn = false;
  float chart_top = 0.0f;     // y of full_bytes
  float chart_bottom = 0.0f;  // y of 0 bytes
  int64_t full_bytes = 0;
  std::vector<MemoryBar> bars;  // stage by stage, rank by rank, measured before formula
};

class MemoryPanel {
 public:
  // The size of its text and drawing (the page's pixel ratio changed):
  // what it draws next is at this scale.
  void set_scale(float scale) { scale_ = scale; }
  explicit MemoryPanel(const Options& options) : scale_(options.scale) {}

  // One frame of the panel for these samples; times in tooltips are from
  // origin_us (the Trace panel's time 0).
  void draw(const MemoryModel& memory, int64_t origin_us = 0);

  const MemoryFrameLayout& last_layout() const { return layout_; }

 private:
  void draw_legend();
  void draw_chart(const MemoryModel& memory, ImVec2 size);
  void draw_tooltip(const MemoryBar& bar, const MemoryModel& memory, int64_t origin_us) const;
  void draw_table(const MemoryModel& memory);

  float scale_ = 1.0f;
  MemoryFrameLayout layout_;
  int hovered_ = -1;  // index into layout_.bars
};

}  // namespace distlab::viz
