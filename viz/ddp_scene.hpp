// One DDP training step on paper, for the DDP panel: the library's bucket
// plan (ddp::plan_buckets) and the alpha-beta cost model of a ring
// all-reduce (collectives::predict) turned into a timeline, and the same
// timeline read back from a trace of a real run. No ImGui here.
//
// The model of a step (what the reducer does, with times from the model):
//   forward: half the backward's time;
//   backward: one gradient after another in the order they become ready,
//     each taking its bytes / backward_bytes_per_s;
//   bucket b's all-reduce starts when its last gradient is ready and the
//     all-reduce of bucket b-1 has ended (one communication stream, buckets
//     in plan order, as the reducer launches them);
//   the optimizer starts when backward and the last all-reduce have ended
//     ("wait for buckets"), and takes bytes / optimizer_bytes_per_s.
// Under no_sync, k micro-steps run forward and backward with no
// communication before the synchronized one.
//
// The step is written as the reducer's trace events (lane "ddp":
// grad_ready, bucket, ddp_wait), so its overlap comes from
// ddp::overlap_of_step, exactly as a measured step's does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectives/cost_model.hpp"
#include "ddp/bucket_plan.hpp"
#include "ddp/overlap.hpp"
#include "trace/event.hpp"

namespace distlab::viz {

struct DdpModel {
  std::string name;                     // "mlp", "reordered", "layers", or the trace's file
  std::vector<ddp::ParamInfo> params;   // registration order
  std::vector<int> ready_order;         // the order backward makes gradients ready
};

// "mlp": 8 Linear(2048, 2048) layers, used in registration order.
// "reordered": the same layers, but the head is registered first and used
// last, so the order before the rebuild (reverse registration) puts its
// gradient, which backward makes ready first, in the last bucket.
// Throws std::invalid_argument for an unknown name.
DdpModel preset_model(const std::string& name);
// Parameters of these element counts (float), used in registration order.
// Throws std::invalid_argument for an empty or non-positive list.
DdpModel model_of_sizes(const std::string& comma_separated_counts);

struct DdpCosts {
  int ranks = 8;
  collectives::LinkParams link{5e-6, 1.0 / 10e9};
  double backward_bytes_per_s = 4e9;
  double optimizer_bytes_per_s = 20e9;
  int no_sync_steps = 0;
};

// Seconds of a ring all-reduce of `bytes` (float) on `ranks` ranks.
double all_reduce_seconds(int64_t bytes, int ranks, const collectives::LinkParams& link);

// A step's timeline, seconds from the start of its first forward.
struct DdpStep {
  struct Interval {
    double begin_s = 0.0;
    double end_s = 0.0;
  };
  struct Grad : Interval {
    int param = 0;
    int bucket = 0;
  };
  struct AllReduce : Interval {
    int bucket = 0;
    int64_t bytes = 0;
  };
  std::vector<Interval> local_forward, local_backward;  // the no_sync micro-steps
  Interval forward;                                     // the synchronized step's
  std::vector<Grad> grads;                              // in the order they became ready
  std::vector<AllReduce> all_reduces;                   // in plan order
  Interval wait;                                        // backward's end to the last all-reduce's end
  Interval optimizer;
  ddp::OverlapStats overlap;                            // of the synchronized step
  double step_s = 0.0;                                  // the optimizer's end (all micro-steps)
  double comm_s = 0.0;                                  // sum of all-reduce seconds
};

// Throws std::invalid_argument when `ready_order` is not a permutation.
DdpStep simulate_ddp_step(const ddp::BucketPlan& plan, const std::vector<int>& ready_order, const DdpCosts& costs);

// A measured step from a trace: the reducer's bucket plans (the first, and
// the rebuilt one), the model they describe, and one rank's step.
struct MeasuredDdp {
  DdpModel model;                        // sizes and names from the plan; ready order from the rebuilt plan
  ddp::BucketPlan before;                // the plan as first recorded
  std::optional<ddp::BucketPlan> after;  // the rebuilt plan, when the run rebuilt
  int rank = 0;
  int instance = 0;                      // which DDP of the rank's, in the order they were built
  int instances = 1;                     // how many the trace holds (lesson 08 builds one per bucket size)
  int64_t step = -1;
  DdpStep measured;                      // times from the step's first gradient, forward left empty
  ddp::OverlapStats overlap;             // ddp::overlap_of_step
};

// Reads, for DDP number `instance` (0: the first) that `rank` built, its
// plans ("bucket plan" events, category bucket_plan, arg plan) and step
// `step` (-1: its last step with a "wait for buckets"). A DDP's events are
// those from its first plan to the next DDP's. Nothing when the trace holds
// no bucket plan. Throws std::invalid_argument naming what is wrong in a
// plan's JSON.
std::optional<MeasuredDdp> measure_ddp_trace(const std::vector<trace::Event>& events, int rank = 0,
                                             int64_t step = -1, int instance = 0);

// A plan from BucketPlan::json(), as the reducer wrote it into the trace.
ddp::BucketPlan parse_plan_json(const std::string& json);

// The packing order of a plan: its buckets' parameters, one after another.
std::vector<int> packing_order(const ddp::BucketPlan& plan);

}  // namespace distlab::viz
