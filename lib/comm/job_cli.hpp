// The flags every DistLab program shares, for CLI11 (header-only, so the
// library itself does not depend on CLI11).
#pragma once

#include <CLI/CLI.hpp>

#include "comm/job.hpp"

namespace distlab::comm {

// --backend, --ranks, --device, --timeout-ms, --trace, --live.
inline void add_job_flags(CLI::App& app, JobOptions& job) {
  app.add_option("--backend", job.backend,
                 "threads: all ranks in this process; auto: one rank per process, started by distlab-run, shared "
                 "memory between ranks on one host and TCP between hosts; gloo: TCP only; nccl: one rank per GPU")
      ->check(CLI::IsMember({"threads", "auto", "gloo", "nccl"}))
      ->capture_default_str();
  app.add_option("--ranks", job.ranks, "number of ranks with --backend threads")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--device", job.device, "threads backend: cpu, or cuda (ranks share the GPUs round-robin)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option_function<long long>(
         "--timeout-ms",
         [&job](long long ms) {
           job.timeout = Milliseconds(ms);
           job.timeout_given = true;  // over DISTLAB_TIMEOUT_MS
         },
         "give up waiting on another rank after this long (default 180000; env DISTLAB_TIMEOUT_MS)")
      ->check(CLI::PositiveNumber);
  app.add_option("--trace", job.trace.file,
                 "write a Chrome trace (open in Perfetto or distlab-viz); env DISTLAB_TRACE");
  app.add_option("--live", job.trace.live, "stream trace events to a listening distlab-viz at HOST:PORT; "
                                           "env DISTLAB_TRACE_LIVE");
}

}  // namespace distlab::comm
