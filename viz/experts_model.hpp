// Tokens per expert as the trace's counter samples say, step by step, for
// the Experts panel. No drawing in here.
//
// The convention (lib/experts/trace_counts.hpp records it): each rank
// samples, once per step, a counter "experts LABEL" (a layer, "layer 3", or
// a run) whose series are "kept <e>" and "dropped <e>" for every expert e
// and "capacity" (-1: dropless). The n-th sample of every rank is step n;
// a step's histogram is the sum over the ranks. Counters with other names
// are ignored.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trace/event.hpp"

namespace distlab::viz {

inline constexpr const char* kExpertsCounterPrefix = "experts ";

// One step of one label, summed over the ranks that sampled it.
struct ExpertStep {
  std::vector<int64_t> kept, dropped;  // per expert
  int64_t capacity = -1;               // an expert's capacity per forward (-1: dropless)
  int ranks = 0;                       // the samples summed
  int64_t kept_total() const;
  int64_t dropped_total() const;
};

// Expert e's kept and dropped from a counter sample's series; nothing for
// an event that is not an experts counter.
struct ExpertSample {
  std::string label;
  std::vector<int64_t> kept, dropped;
  int64_t capacity = -1;
};
std::optional<ExpertSample> expert_sample_of(const trace::Event& event);

class ExpertsModel {
 public:
  // Takes one event: an experts counter is kept, every other event ignored.
  void add(const trace::Event& event);
  void clear();
  bool empty() const { return labels_.empty(); }

  // Labels in the order they first appear.
  const std::vector<std::string>& labels() const { return labels_; }
  // The steps of `label`, in order (empty for an unknown label).
  const std::vector<ExpertStep>& steps(const std::string& label) const;
  // The largest kept + dropped of any expert in any step of `label`: one
  // scale for every step's histogram.
  int64_t largest(const std::string& label) const;

 private:
  std::vector<std::string> labels_;
  std::map<std::string, std::vector<ExpertStep>> steps_;
  std::map<std::pair<std::string, int>, size_t> next_;  // (label, rank) -> its next step
};

}  // namespace distlab::viz
