#include "comm/clock_sync.hpp"

#include <ATen/ATen.h>

#include <limits>

namespace distlab::comm {

trace::ClockOffset measure_clock_offset(Communicator& comm, int rounds) {
  if (comm.size() == 1) return {};
  const auto options = at::TensorOptions().dtype(at::kLong).device(comm.device());
  at::Tensor message = at::zeros({1}, options);
  // Ranks on rank 0's machine read its very clock: their offset is 0, with
  // no uncertainty (a measurement would add a loaded machine's jitter,
  // hundreds of microseconds, and turn arrows around). Each rank tells rank
  // 0 its clock domain, rank 0 answers 1 where pings are needed; messages on
  // the sync tag, so that the job's collectives keep their numbers.
  const auto domain = static_cast<int64_t>(trace::clock_domain());
  if (comm.rank() == 0) {
    for (int peer = 1; peer < comm.size(); ++peer) {
      comm.recv(message, peer, kClockSyncTag);
      const bool shared = message.cpu().item<int64_t>() == domain;
      message.fill_(shared ? 0 : 1);
      comm.send(message, peer, kClockSyncTag);
      if (shared) continue;
      for (int round = 0; round < rounds; ++round) {
        comm.recv(message, peer, kClockSyncTag);
        message.fill_(trace::now_us());  // T: after the ping arrived, before the pong leaves
        comm.send(message, peer, kClockSyncTag);
      }
    }
    return {};
  }
  message.fill_(domain);
  comm.send(message, 0, kClockSyncTag);
  comm.recv(message, 0, kClockSyncTag);
  if (message.cpu().item<int64_t>() == 0) return {};  // rank 0's clock
  trace::ClockOffset best{0, std::numeric_limits<int64_t>::max()};
  for (int round = 0; round < rounds; ++round) {
    const int64_t t1 = trace::now_us();
    comm.send(message, 0, kClockSyncTag);
    comm.recv(message, 0, kClockSyncTag);
    const int64_t t4 = trace::now_us();
    const int64_t their = message.cpu().item<int64_t>();
    // +1 for each of the three clock readings rounded down to a microsecond.
    const int64_t uncertainty = (t4 - t1) / 2 + 2;
    if (uncertainty < best.uncertainty_us) best = {their - (t1 + t4) / 2, uncertainty};
  }
  return best;
}

void start_tracing(Communicator& comm, const trace::Config& config, bool several_processes) {
  trace::Recorder* recorder = comm.recorder();
  if (recorder == nullptr || !config.any()) return;
  trace::ClockOffset offset;
  const bool measure = several_processes;  // for the file and for the live stream alike
  if (measure) offset = measure_clock_offset(comm);
  trace::add_sinks(*recorder, config, comm.rank(), several_processes, measure ? &offset : nullptr);
}

}  // namespace distlab::comm
