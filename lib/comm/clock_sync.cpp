#include "comm/clock_sync.hpp"

#include <ATen/ATen.h>

#include <limits>

namespace distlab::comm {

trace::ClockOffset measure_clock_offset(Communicator& comm, int rounds) {
  if (comm.size() == 1) return {};
  const auto options = at::TensorOptions().dtype(at::kLong).device(comm.device());
  // Ranks on rank 0's machine read its very clock: their offset is 0, with
  // no uncertainty (a measurement would add a loaded machine's jitter,
  // hundreds of microseconds, and turn arrows around). The others ping.
  const auto domain = static_cast<int64_t>(trace::clock_domain());
  at::Tensor rank0_domain = at::full({1}, domain, options);
  comm.native_broadcast(rank0_domain, 0);
  const bool shared = rank0_domain.cpu().item<int64_t>() == domain;
  at::Tensor pinging = at::zeros({comm.size()}, options);  // 1 for each rank that measures
  if (!shared) pinging[comm.rank()].fill_(1);
  comm.native_all_reduce(pinging);
  const at::Tensor pings = pinging.cpu();
  if (shared && comm.rank() != 0) return {};
  at::Tensor message = at::zeros({1}, options);
  if (comm.rank() == 0) {
    for (int peer = 1; peer < comm.size(); ++peer) {
      if (pings[peer].item<int64_t>() == 0) continue;
      for (int round = 0; round < rounds; ++round) {
        comm.recv(message, peer, kClockSyncTag);
        message.fill_(trace::now_us());  // T: after the ping arrived, before the pong leaves
        comm.send(message, peer, kClockSyncTag);
      }
    }
    return {};
  }
  trace::ClockOffset best{0, std::numeric_limits<int64_t>::max()};
  for (int round = 0; round < rounds; ++round) {
    const int64_t t1 = trace::now_us();
    comm.send(message, 0, kClockSyncTag);
    comm.recv(message, 0, kClockSyncTag);
    const int64_t t4 = trace::now_us();
    const int64_t their = message.item<int64_t>();
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
