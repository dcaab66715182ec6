// Running the ranks of a job, whatever the backend: the one entry point of
// every lesson, benchmark and trainer.
//
//   threads  N ranks as N threads of this process (--ranks N)
//   auto     this process is one rank; the others are other processes
//            started by distlab-run, torchrun, srun or mpirun; ranks on one
//            host talk through shared memory, others through TCP
//            (comm/same_host_backend.hpp)
//   gloo     the same, every pair through TCP
//   nccl     like gloo, one process per GPU
//
//   comm::JobOptions job;               // filled by add_job_flags (job_cli.hpp)
//   comm::run_job(job, [&](comm::Communicator& comm) { ... });
#pragma once

#include <functional>
#include <string>

#include "comm/communicator.hpp"
#include "trace/config.hpp"

namespace distlab::comm {

struct JobOptions {
  std::string backend = "threads";  // threads | auto | gloo | nccl
  int ranks = 4;                    // threads: how many thread ranks
  std::string device = "cpu";       // threads: cpu | cuda (ranks share the GPUs round-robin)
  Milliseconds timeout = kDefaultTimeout;
  bool timeout_given = false;       // set by --timeout-ms: DISTLAB_TIMEOUT_MS then leaves it alone
  Milliseconds connect_timeout = kDefaultConnectTimeout;
  trace::Config trace;              // --trace FILE, --live HOST:PORT
  bool announce = true;             // say the intra-op threads on stderr (a program running many jobs says it once)
};

// Reads DISTLAB_TIMEOUT_MS, DISTLAB_CONNECT_TIMEOUT_MS, DISTLAB_TRACE and DISTLAB_TRACE_LIVE into what
// the flags left unset. Throws SetupError for a bad value.
JobOptions with_env_defaults(JobOptions options);

// Runs body once per rank of this process (see above). Blocks until all of
// this process's ranks are done; rethrows the first failure, after writing
// it to TORCHELASTIC_ERROR_FILE when torchrun set one (comm/error_file.hpp).
// Trace files are flushed and closed before it returns.
void run_job(const JobOptions& options, const std::function<void(Communicator&)>& body);

}  // namespace distlab::comm
