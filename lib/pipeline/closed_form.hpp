// Each schedule's bubble as the papers give it, in closed form, to set
// beside the simulator and a measured run.
//
// Idle seconds per rank in one step, for per-stage costs equal on every
// stage: F forward, B full backward (= I + W), W weight gradient, all of one
// stage (one chunk when a rank holds several), messages free. The idle is
// makespan minus the rank's own compute; `exact_when` says where the
// simulator reproduces it exactly (tests/pipeline/closed_form_test.cpp
// holds them equal there):
//
//   gpipe, 1f1b     (p-1)(F+B)           GPipe paper; any m
//   interleaved     (p-1)(F+B)           Megatron-LM 2021 section 2.2: (1/v)(p-1)
//                                        of one rank's whole share F_r + B_r
//                                        = v(F+B); m a multiple of p
//   zb_h1           (p-1)(F+B-2W)        DualPipe README's ZB1P (the paper's
//                                        ZB-H1 (p-1)(F+I-W)); F = I = W, m >= p
//   interleaved_zb  (p-1)(F+B-2W)        ZB1P per chunk: 1/v of ZB-H1's for the
//                                        same share; W <= F, W <= I, m >= p
//   zbv             (p-1)F               F = I = W, m >= 2p-1 (see below)
//   dualpipev       (PP/2-1)(F&B+B-3W)   DualPipe README, PP = 2p stages, so
//                                        (p-1)(F&B+B-3W); F&B = F + B -
//                                        overlap min(F, B) (ActionCosts); the
//                                        most idle rank; F = I = W, m >= 2p
//   looped_bfs      none (neither paper nor README gives one)
//
// ZBV: the zero-bubble paper (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024) calls ZB-H2 and ZBV bubble-free when F = B = W
// (its B is DistLab's I). What the simulator finds zero is the idle inside
// each rank's run: from its first action to its last no rank waits
// (closed_form_test checks it). Within one step rank r still waits r
// forwards for its first input and ends p-1-r units before the last rank:
// the (p-1)F counted here, which "zero" leaves out.
#pragma once

#include <optional>
#include <string>

#include "pipeline/schedule.hpp"
#include "pipeline/simulator.hpp"

namespace distlab::pipeline {

struct ClosedForm {
  double idle_s = 0;       // idle seconds per rank (the most idle rank for dualpipev)
  std::string formula;     // "(p-1)(F+B)"
  std::string exact_when;  // "any m", "F = I = W, m >= p", ...
};

// `costs.uniform` (and costs.overlap) are the per-stage costs; nullopt for
// LoopedBFS.
std::optional<ClosedForm> closed_form(ScheduleKind kind, int ranks, const ActionCosts& costs);

// Whether (p, m) is a shape where the formula holds (the m part of
// `exact_when`: m a multiple of p for interleaved, m >= p for ZB-H1 and
// interleaved zero bubble, m >= 2p-1 for ZBV; any m the schedule accepts
// for the others). The cost part (F = I = W, ...) is the caller's to see.
bool exact_for_shape(ScheduleKind kind, int ranks, int microbatches);

// The closed form's idle as the step's mean idle fraction over ranks, the
// simulator's `bubble`: each rank's work is its own actions' cost under
// `costs`, and the step lasts the closed form's idle plus the least work of
// any rank (the most idle one).
std::optional<double> closed_form_bubble(const Schedule& schedule, const ActionCosts& costs);

}  // namespace distlab::pipeline
