// What a seed model's mixture-of-experts feed-forward is made of
// (models/moe_feed_forward.hpp): small enough for the models' headers.
#pragma once

#include <cstdint>
#include <string>

namespace distlab::models {

struct MoeFeedForwardOptions {
  int64_t experts = 0;  // 0: the dense feed-forward (the seeds')
  int64_t top_k = 1;
  double capacity_factor = 0;  // <= 0: dropless
  double balance_coefficient = 0.01, z_coefficient = 0.001;
  bool enabled() const { return experts > 0; }
};

// Throws std::invalid_argument naming `who` and the value: E < 0, k not in
// [1, E], a negative coefficient.
void check_moe_options(const MoeFeedForwardOptions& options, const std::string& who);

}  // namespace distlab::models
