#include "comm/job.hpp"

#include <torch/cuda.h>

#include <cerrno>  // program_invocation_short_name
#include <cstdlib>

#include "comm/env.hpp"
#include "comm/error_file.hpp"
#include "comm/gloo_backend.hpp"
#include "comm/nccl_backend.hpp"
#include "comm/threads_backend.hpp"

namespace distlab::comm {

namespace {
// A positive number of milliseconds from `name`, if set.
void read_ms(const char* name, Milliseconds& into) {
  const char* text = std::getenv(name);
  if (text == nullptr) return;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value <= 0)
    throw SetupError(std::string(name) + " must be a positive number of milliseconds, got '" + text + "'");
  into = Milliseconds(value);
}
}  // namespace

JobOptions with_env_defaults(JobOptions options) {
  options.trace = options.trace.with_env_defaults();
  read_ms("DISTLAB_TIMEOUT_MS", options.timeout);
  read_ms("DISTLAB_CONNECT_TIMEOUT_MS", options.connect_timeout);
  return options;
}

namespace {
void run_job_unrecorded(const JobOptions& options, const std::function<void(Communicator&)>& body) {
  CommOptions comm_options;
  comm_options.timeout = options.timeout;
  comm_options.connect_timeout = options.connect_timeout;
  if (options.backend == "threads") {
    if (options.device != "cpu" && options.device != "cuda")
      throw SetupError("--device must be cpu or cuda, got '" + options.device + "'");
    if (options.device == "cuda") {
      if (!torch::cuda::is_available())
        throw SetupError("--device cuda: no CUDA device is usable here (this LibTorch or this machine has none)");
      comm_options.device = at::Device(at::kCUDA);  // no index: rank r takes GPU r % count
    }
    comm_options.recorder = trace::make_recorder(options.trace, 0, /*several_processes=*/false);
    run_thread_ranks(options.ranks, body, comm_options);
    comm_options.recorder->flush();
    return;
  }
  const WorldInfo world = world_from_env();
  comm_options.recorder = trace::make_recorder(options.trace, world.rank, world.world_size > 1);
  std::unique_ptr<Communicator> comm;
  if (options.backend == "gloo")
    comm = make_gloo_communicator(world, comm_options);
  else if (options.backend == "nccl")
    comm = make_nccl_communicator(world, comm_options);
  else
    throw SetupError("unknown backend '" + options.backend + "' (expected threads, gloo or nccl)");
  body(*comm);
  comm_options.recorder->flush();
}
}  // namespace

void run_job(const JobOptions& options, const std::function<void(Communicator&)>& body) {
  try {
    run_job_unrecorded(options, body);
  } catch (const std::exception& e) {
    // Under torchrun, its failure summary then names this error.
    record_error(e, program_invocation_short_name);
    throw;
  }
}

}  // namespace distlab::comm
