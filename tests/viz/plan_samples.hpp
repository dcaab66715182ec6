// A plan record written out by hand for the Plan panel's tests, in the
// schema of planner/record.hpp, with the numbers the tests work out from it.
//
//   place  layout      pipeline  predicted ms  measured ms      error
//     1    1x4x1x1        1           50         100            -50%
//     2    2x2x1x1        2           60          80            -25%
//     3    1x1x4x1        1           70         failed: rank 1: out of memory
//     4    1x2x2x1        1           80         (not run)
//     9    4x1x1x1        4           90          90              0%
//    12    1x1x1x4        1          100          80            +25%
//
// In the file the layouts are not in place order (9 comes first), place 2's
// memory lists pipeline rank 1 before rank 0, and there are fields no
// reader knows. Its "scores" are wrong on purpose: the model computes its
// own. The job's bytes, predicted against metered: 400 vs 500 MB (place
// 1), 300 vs 300 (2), 200 vs 250 (9); place 12 metered nothing.
#pragma once

#include <cstdint>
#include <string>

namespace distlab::viz::testing_util {

inline const std::string kPlanJson = R"json({
 "format": "distlab-plan",
 "version": 1,
 "written_by": "a field no reader knows",
 "preset": "cpu",
 "ranks": 4,
 "batch": 20,
 "bptt": 35,
 "profile": {"path": "planner/profiles/vm-2026-11-30.json", "machine": "vm (2 cores)", "date": "2026-11-30",
             "cores": 2, "device": "cpu", "pieces": [1, 2, 3]},
 "accepted": 412,
 "refused": 96,
 "predict_seconds": 0.08,
 "layouts": [
  {"place": 9, "name": "4x1x1x1 gpipe m8 none none fp32", "command": "lesson_11_capstone --preset cpu --ranks 4 --chunks 8",
   "pipeline": 4, "replicas": 1, "context": 1, "tensor": 1,
   "predicted": {"step_ms": 90, "critical_ms": 90, "packed_ms": 70, "bubble": 0.27, "wire_bytes": 20000000, "mfu": 0.03,
                 "job_bytes": 200000000},
   "memory": [
    {"pipeline_rank": 0, "parameters": 10000000, "gradients": 10000000, "gradient_shard": 0, "optimizer_state": 0,
     "buffers": 0, "activations": 20000000, "backward_scratch": 0, "data": 5000000, "data_setup": 40000000, "total": 55000000},
    {"pipeline_rank": 1, "parameters": 10000000, "gradients": 10000000, "gradient_shard": 0, "optimizer_state": 0,
     "buffers": 0, "activations": 20000000, "backward_scratch": 0, "data": 5000000, "data_setup": 40000000, "total": 55000000},
    {"pipeline_rank": 2, "parameters": 10000000, "gradients": 10000000, "gradient_shard": 0, "optimizer_state": 0,
     "buffers": 0, "activations": 20000000, "backward_scratch": 0, "data": 5000000, "data_setup": 40000000, "total": 55000000},
    {"pipeline_rank": 3, "parameters": 10000000, "gradients": 10000000, "gradient_shard": 0, "optimizer_state": 0,
     "buffers": 0, "activations": 20000000, "backward_scratch": 2000000, "data": 5000000, "data_setup": 40000000,
     "total": 55000000}],
   "measured": {"ok": true, "median_ms": 90, "low_ms": 88, "high_ms": 95, "steps_ms": [88, 90, 95],
                "metered_bytes": 250000000, "peak_rss_bytes": 700000000}},
  {"place": 1, "name": "1x4x1x1 1f1b m1 ddp none bf16", "command": "lesson_11_capstone --preset cpu --ranks 4 --replicas 4",
   "pipeline": 1, "replicas": 4, "context": 1, "tensor": 1,
   "predicted": {"step_ms": 50, "critical_ms": 45, "packed_ms": 50, "bubble": 0, "wire_bytes": 120000000, "mfu": 0.04,
                 "job_bytes": 400000000},
   "memory": [
    {"pipeline_rank": 0, "parameters": 40000000, "gradients": 40000000, "gradient_shard": 0, "optimizer_state": 0,
     "buffers": 40000000, "activations": 9000000, "backward_scratch": 2000000, "data": 5000000, "data_setup": 7000000,
     "total": 136000000}],
   "measured": {"ok": true, "median_ms": 100, "low_ms": 95, "high_ms": 110, "steps_ms": [95, 100, 110],
                "metered_bytes": 500000000, "peak_rss_bytes": 900000000}},
  {"place": 2, "name": "2x2x1x1 1f1b m4 zero1 none fp32",
   "command": "lesson_11_capstone --preset cpu --ranks 4 --replicas 2 --chunks 4 --zero 1",
   "pipeline": 2, "replicas": 2, "context": 1, "tensor": 1,
   "predicted": {"step_ms": 60, "critical_ms": 55.5, "packed_ms": 58.25, "bubble": 0.2, "wire_bytes": 80000000,
                 "mfu": 0.035, "job_bytes": 300000000, "flops": 123},
   "memory": [
    {"pipeline_rank": 1, "parameters": 22000000, "gradients": 22000000, "gradient_shard": 0, "optimizer_state": 0,
     "buffers": 22000000, "activations": 10000000, "backward_scratch": 2000000, "data": 5000000, "data_setup": 7000000,
     "total": 83000000},
    {"pipeline_rank": 0, "parameters": 20000000, "gradients": 20000000, "gradient_shard": 8000000,
     "optimizer_state": 8000000, "buffers": 4000000, "activations": 12000000, "backward_scratch": 0, "data": 5000000,
     "data_setup": 7000000, "total": 77000000}],
   "measured": {"ok": true, "median_ms": 80, "low_ms": 78, "high_ms": 85, "steps_ms": [78, 80, 85],
                "metered_bytes": 300000000, "peak_rss_bytes": 800000000, "note": "ignored"}},
  {"place": 3, "name": "1x1x4x1 1f1b m1 ddp none fp32", "command": "lesson_11_capstone --preset cpu --ranks 4 --context 4",
   "pipeline": 1, "replicas": 1, "context": 4, "tensor": 1,
   "predicted": {"step_ms": 70, "critical_ms": 70, "packed_ms": 60, "bubble": 0, "wire_bytes": 50000000, "mfu": 0.02,
                 "job_bytes": 350000000},
   "memory": [
    {"pipeline_rank": 0, "parameters": 40000000, "gradients": 40000000, "gradient_shard": 0, "optimizer_state": 0,
     "buffers": 40000000, "activations": 9000000, "backward_scratch": 2000000, "data": 5000000, "data_setup": 7000000,
     "total": 136000000}],
   "measured": {"ok": false, "error": "rank 1: out of memory"}},
  {"place": 4, "name": "1x2x2x1 1f1b m1 ddp none fp32", "command": "lesson_11_capstone --preset cpu --ranks 4 --replicas 2 --context 2",
   "pipeline": 1, "replicas": 2, "context": 2, "tensor": 1,
   "predicted": {"step_ms": 80, "critical_ms": 80, "packed_ms": 75, "bubble": 0, "wire_bytes": 60000000, "mfu": 0.02,
                 "job_bytes": 404000000},
   "memory": [
    {"pipeline_rank": 0, "parameters": 30000000, "gradients": 30000000, "gradient_shard": 0, "optimizer_state": 0,
     "buffers": 30000000, "activations": 5000000, "backward_scratch": 1000000, "data": 5000000, "data_setup": 7000000,
     "total": 101000000}]},
  {"place": 12, "name": "1x1x1x4 1f1b m1 ddp none fp32", "command": "lesson_11_capstone --preset cpu --ranks 4 --tensor 4",
   "pipeline": 1, "replicas": 1, "context": 1, "tensor": 4,
   "predicted": {"step_ms": 100, "critical_ms": 100, "packed_ms": 90, "bubble": 0, "wire_bytes": 90000000, "mfu": 0.01,
                 "job_bytes": 330000000},
   "memory": [
    {"pipeline_rank": 0, "parameters": 10000000, "gradients": 10000000, "gradient_shard": 0, "optimizer_state": 0,
     "buffers": 10000000, "activations": 3000000, "backward_scratch": 1000000, "data": 5000000, "data_setup": 7000000,
     "total": 39000000}],
   "measured": {"ok": true, "median_ms": 80, "low_ms": 79, "high_ms": 81, "steps_ms": [79, 80, 81],
                "metered_bytes": 0, "peak_rss_bytes": 600000000}}
 ],
 "scores": {"layouts": 4, "mean_abs_error": 0.9, "worst_abs_error": 0.9, "spearman": 0.99, "regret": 0.5,
            "memory_mean_abs_error": 0.9, "memory_worst_abs_error": 0.9}
}
)json";

// The largest bar of any layout: place 1's (and place 3's) one rank, 136 MB.
inline constexpr int64_t kPlanFullBytes = 136'000'000;

}  // namespace distlab::viz::testing_util
