// A plan as a file: what `distlab-plan --record FILE` writes, for the
// visualizer's Plan view (viz/plan_model.hpp reads it) and for
// distlab-bench plan. JSON, one object:
//
//   {"format": "distlab-plan", "version": 1,
//    "preset": "cpu", "ranks": 4, "batch": 20, "bptt": 35,
//    "profile": {"path": ..., "machine": ..., "date": ..., "cores": 2},
//    "accepted": 1234, "refused": 567, "predict_seconds": 0.12,
//    "layouts": [                      // the top rows, then every measured one, by place
//      {"place": 1,                    // 1-based, in the predicted ranking
//       "name": "2x2x1x1 1f1b m4 ddp none fp32", "command": "lesson_11_capstone ...",
//       "pipeline": 2, "replicas": 2, "context": 1, "tensor": 1,
//       "predicted": {"step_ms": 66.1, "critical_ms": ..., "packed_ms": ..., "bubble": 0.2,
//                     "wire_bytes": 123, "mfu": 0.05,
//                     "job_bytes": ...},       // every rank's predicted peak added up
//       "memory": [                    // one per pipeline rank, bytes by category
//         {"pipeline_rank": 0, "parameters": ..., "gradients": ..., "gradient_shard": ...,
//          "optimizer_state": ..., "buffers": ..., "activations": ..., "backward_scratch": ...,
//          "data": ..., "data_setup": ..., "total": ...}],
//       "measured": {"ok": true, "median_ms": 70.2, "low_ms": 68.0, "high_ms": 75.1,
//                    "steps_ms": [...], "metered_bytes": ..., "peak_rss_bytes": ...}
//                   or {"ok": false, "error": "..."}; absent when not run
//      }],
//    "scores": {"layouts": 8, "mean_abs_error": 0.45, "worst_abs_error": 0.74,
//               "spearman": 0.86, "regret": 0.28,
//               "memory_mean_abs_error": 0.07, "memory_worst_abs_error": 0.12}
//               absent when fewer than 2 layouts ran
//   }
//
// The file is written whole to a temporary name, then renamed.
#pragma once

#include <string>
#include <vector>

#include "planner/profile.hpp"
#include "table.hpp"

namespace distlab::planner {

struct PlanHeader {
  std::string profile_path;
  int ranks = 0;
  int accepted = 0, refused = 0;
  double predict_seconds = 0;
};

// `top` rows of `ranked`, and every row of `measured` (which also carry
// their place in `ranked`).
void write_plan_record(const std::string& path, const ModelShape& model, const Profile& profile,
                       const PlanHeader& header, const std::vector<Ranked>& ranked, size_t top,
                       const std::vector<MeasuredRow>& measured);

}  // namespace distlab::planner
