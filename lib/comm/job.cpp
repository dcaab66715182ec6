#include "comm/job.hpp"

#include <torch/cuda.h>

#include <cerrno>  // program_invocation_short_name
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "comm/clock_sync.hpp"
#include "comm/env.hpp"
#include "comm/error_file.hpp"
#include "comm/flight_op.hpp"
#include "comm/gloo_backend.hpp"
#include "comm/intra_op_threads.hpp"
#include "comm/nccl_backend.hpp"
#include "comm/same_host_backend.hpp"
#include "comm/threads_backend.hpp"
#include "flight/recorder.hpp"

namespace distlab::comm {

namespace {
// How much later than its peer a rank that failed because of that peer
// writes torchrun's error file (see run_job).
constexpr std::chrono::milliseconds kPeerFailureDelay{1500};

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

// Said once per machine, on stderr so that a program's own output stays clean.
void announce(const IntraOpThreads& threads, int local_ranks) {
  if (std::getenv("DISTLAB_QUIET") != nullptr) return;
  std::fprintf(stderr, "distlab: %d intra-op thread(s) per rank for %d rank(s) here (%s)\n", threads.threads,
               local_ranks, threads.reason.c_str());
}

// A process backend started without a launcher is a job of one rank, which
// runs without complaint: say so, and how to start the others.
void announce_alone(const WorldInfo& world, const std::string& backend) {
  if (world.source != "none" || std::getenv("DISTLAB_QUIET") != nullptr) return;
  std::fprintf(stderr,
               "distlab: no launcher's variables (RANK, WORLD_SIZE, ...): --backend %s runs this process alone, a job "
               "of 1 rank; for N ranks start it as distlab-run --nproc-per-node N -- %s ...\n",
               backend.c_str(), program_invocation_short_name);
}
}  // namespace

JobOptions with_env_defaults(JobOptions options) {
  options.trace = options.trace.with_env_defaults();
  if (!options.timeout_given) read_ms("DISTLAB_TIMEOUT_MS", options.timeout);
  read_ms("DISTLAB_CONNECT_TIMEOUT_MS", options.connect_timeout);
  return options;
}

namespace {
void run_job_unrecorded(const JobOptions& options, const std::shared_ptr<flight::Recorder>& flight,
                        const std::function<void(Communicator&)>& body) {
  CommOptions comm_options;
  comm_options.flight = flight;
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
    const IntraOpThreads threads = choose_intra_op_threads(options.ranks);
    if (options.announce) announce(threads, options.ranks);
    run_thread_ranks(
        options.ranks,
        [&](Communicator& comm) {
          set_intra_op_threads(threads);
          body(comm);
        },
        comm_options);
    comm_options.recorder->flush();
    return;
  }
  const WorldInfo world = world_from_env();
  announce_alone(world, options.backend);
  const IntraOpThreads threads = choose_intra_op_threads(world.local_world_size);
  set_intra_op_threads(threads);
  if (world.local_rank == 0 && options.announce) announce(threads, world.local_world_size);
  // No sinks yet: start_tracing adds them once the clock offset is measured.
  comm_options.recorder = std::make_shared<trace::Recorder>();
  std::unique_ptr<Communicator> comm;
  if (options.backend == "gloo")
    comm = make_gloo_communicator(world, comm_options);
  else if (options.backend == "auto")
    comm = make_same_host_communicator(world, comm_options);
  else if (options.backend == "nccl")
    comm = make_nccl_communicator(world, comm_options);
  else
    throw SetupError("unknown backend '" + options.backend + "' (expected threads, auto, gloo or nccl)");
  start_tracing(*comm, options.trace, world.world_size > 1);
  body(*comm);
  comm_options.recorder->flush();
}
}  // namespace

void run_job(const JobOptions& options, const std::function<void(Communicator&)>& body) {
  // Under torchrun, its failure summary then names this error. The body's
  // error is written before the communicator closes its connections: once
  // they close, the other ranks fail at once and torchrun may stop this
  // process before it gets to write.
  const auto flight = make_flight_recorder(flight::files_dir(options.trace.file));
  flight::dump_on_signals();  // SIGUSR1: dump and go on; SIGTERM: dump, then stop
  std::mutex mutex;
  bool recorded = false;
  auto record_once = [&](const std::exception& e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!recorded) record_error(e, program_invocation_short_name);
    recorded = true;
  };
  auto recording_body = [&](Communicator& comm) {
    try {
      body(comm);
    } catch (const std::exception& e) {
      // torchrun names as root cause the failure with the earliest
      // timestamp, in whole seconds, among the ranks it saw fail. A rank
      // that failed because a peer did (the peer closed its connection, or
      // never answered) writes a second later, so that the peer's own error
      // comes first; torchrun usually stops this rank before then.
      comm.flight_ring()->set_exit(std::string("failed: ") + e.what());
      flight->dump(std::string("failed exit: ") + e.what());
      const auto* comm_error = dynamic_cast<const CommError*>(&e);
      if (comm_error && !dynamic_cast<const SetupError*>(&e) && std::getenv("TORCHELASTIC_ERROR_FILE"))
        std::this_thread::sleep_for(kPeerFailureDelay);
      record_once(e);
      throw;
    }
  };
  try {
    run_job_unrecorded(options, flight, recording_body);
  } catch (const std::exception& e) {
    record_once(e);  // set-up errors: flags, environment, connecting
    throw;
  }
}

}  // namespace distlab::comm
