#include "collectives/cost_model.hpp"

#include <algorithm>

namespace distlab::collectives {

double predict_step(const Step& step, int world_size, int elem_bytes, const LinkParams& link) {
  // Per rank: messages and bytes out, messages and bytes in.
  std::vector<int64_t> sends(world_size, 0), sent(world_size, 0), recvs(world_size, 0), received(world_size, 0);
  for (const Transfer& t : step.transfers) {
    const int64_t bytes = t.range.count * elem_bytes;
    ++sends[t.src];
    sent[t.src] += bytes;
    ++recvs[t.dst];
    received[t.dst] += bytes;
  }
  double busiest = 0.0;
  for (int r = 0; r < world_size; ++r) {
    const double out = sends[r] * link.alpha_s + static_cast<double>(sent[r]) * link.beta_s_per_byte;
    const double in = recvs[r] * link.alpha_s + static_cast<double>(received[r]) * link.beta_s_per_byte;
    busiest = std::max({busiest, out, in});
  }
  return busiest;
}

Prediction predict(const Plan& plan, const LinkParams& link) {
  Prediction prediction;
  for (const Step& step : plan.steps) {
    prediction.step_seconds.push_back(predict_step(step, plan.world_size, plan.elem_bytes, link));
    prediction.total_seconds += prediction.step_seconds.back();
  }
  for (int r = 0; r < plan.world_size; ++r)
    prediction.max_bytes_sent_per_rank = std::max(prediction.max_bytes_sent_per_rank, plan.bytes_sent_by(r));
  return prediction;
}

double bus_bandwidth_factor(Collective collective, int world_size) {
  const double p = world_size;
  switch (collective) {
    case Collective::kAllReduce: return 2.0 * (p - 1) / p;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll: return (p - 1) / p;
    case Collective::kBroadcast:
    case Collective::kReduce: return 1.0;
  }
  return 1.0;
}

}  // namespace distlab::collectives
