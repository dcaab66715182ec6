// The alpha-beta cost model: a message of n bytes costs alpha + n * beta.
//
// A step's time is set by its busiest port: every rank sends and receives at
// once (full duplex), but one rank's messages in one step share its link,
// so a step costs max over ranks of (messages * alpha + bytes * beta),
// counted separately for sending and receiving. This is the slides' story:
// a 5 MB file sent to 7 friends at 1 MB/s takes 35 s whether sent one after
// another or all at once, and 15 s as a binomial tree. No LibTorch here.
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/plan.hpp"

namespace distlab::collectives {

struct LinkParams {
  double alpha_s = 0.0;          // latency per message, seconds
  double beta_s_per_byte = 0.0;  // seconds per byte (1 / bandwidth)
};

struct Prediction {
  std::vector<double> step_seconds;  // one per plan step
  double total_seconds = 0.0;
  int64_t max_bytes_sent_per_rank = 0;
};

double predict_step(const Step& step, int world_size, int elem_bytes, const LinkParams& link);
Prediction predict(const Plan& plan, const LinkParams& link);

// Algorithm bandwidth and bus bandwidth as nccl-tests define them:
// algbw = bytes / seconds; busbw = algbw * factor, with factor 2(p-1)/p for
// all-reduce, (p-1)/p for reduce-scatter, all-gather and all-to-all, 1 for broadcast and
// reduce. busbw is comparable to the link's bandwidth whatever p is.
double bus_bandwidth_factor(Collective collective, int world_size);

}  // namespace distlab::collectives
