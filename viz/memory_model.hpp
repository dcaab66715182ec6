// A rank's memory as its counter samples say, grouped for the Memory panel
// and the Trace panel's memory track. No drawing in here.
//
// The convention (lib/zero records it, see zero/memory.hpp): each rank
// samples what it holds as a trace counter (trace::Event::is_counter())
//   "memory STAGE"      measured, several times per step (before, after)
//   "accounting STAGE"  the ZeRO paper's bytes for that stage and rank
// where STAGE is "DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3" or any other text
// ("naive ZeRO-1"). A bare "memory" is a measured sample of no stage. The
// series, in bytes, stacked in this order from the bottom:
//   parameters, gradients, optimizer state, buffers, activations
// A missing series counts 0, any other series is left out of the bars, and
// counters with other names are ignored.
//
// Per stage and rank the panel shows two bars side by side:
//   measured  the peak sample: the one with the largest total (the
//             earliest of equal ones). It is usually not the last sample:
//             after a step ZeRO-3 frees its gathered parameters.
//   formula   the latest accounting sample.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trace/event.hpp"

namespace distlab::viz {

inline constexpr const char* kMeasuredCounterPrefix = "memory";
inline constexpr const char* kAccountingCounterPrefix = "accounting";

inline constexpr int kMemorySeriesCount = 5;
// The series' names as they are recorded, in stacking order (bottom first).
inline constexpr std::array<const char*, kMemorySeriesCount> kMemorySeries = {
    "parameters", "gradients", "optimizer state", "buffers", "activations"};

enum class MemoryKind { kMeasured, kAccounting };

// What a counter's name says: measured or formula, and of which stage.
// Nothing for a counter of another name ("memory" must be followed by a
// space and the stage, or nothing).
struct MemoryCounterName {
  MemoryKind kind = MemoryKind::kMeasured;
  std::string stage;  // "" for a bare "memory"
};
std::optional<MemoryCounterName> parse_memory_counter(const std::string& name);

// One sample's bytes per series (kMemorySeries order).
struct MemorySample {
  int64_t at_us = 0;
  int rank = 0;
  std::array<int64_t, kMemorySeriesCount> bytes{};

  int64_t total() const;
};

// A counter event's series by name; a missing or unreadable value is 0
// (a foreign "1.5e3" is read as 1500).
MemorySample memory_sample_of(const trace::Event& counter);

// One point of a rank's memory over time: a measured sample's total.
struct MemoryPoint {
  int64_t at_us = 0;
  int64_t total = 0;
  uint32_t stage = 0;   // index into MemoryModel::stages()
  uint32_t sample = 0;  // index into MemoryModel::samples()
};

class MemoryModel {
 public:
  // Takes one event: a memory or accounting counter sample is kept, every
  // other event ignored. Returns whether it was kept.
  bool add(const trace::Event& event);
  void clear() { *this = MemoryModel(); }

  bool empty() const { return samples_.empty(); }
  // Every sample kept, in the order added.
  const std::vector<MemorySample>& samples() const { return samples_; }

  // Stage names by their first sample's time (then the order added).
  std::vector<std::string> stages() const;
  const std::string& stage_name(uint32_t stage) const { return stages_[stage].name; }
  // Ranks with any sample of `stage`, ascending.
  std::vector<int> ranks_of(const std::string& stage) const;
  // The measured peak and the latest formula of `stage` on `rank`.
  std::optional<MemorySample> peak(const std::string& stage, int rank) const;
  std::optional<MemorySample> accounting(const std::string& stage, int rank) const;
  // How many measured samples `stage` has on `rank`.
  size_t measured_count(const std::string& stage, int rank) const;

  // Ranks with measured samples, ascending, and each one's samples of every
  // stage in time order (equal times in the order added): a step line.
  std::vector<int> timeline_ranks() const;
  const std::vector<MemoryPoint>& timeline(int rank) const;
  // The largest measured total of any rank (the track's scale), and of any
  // bar (measured peaks and formulas alike: the panel's scale).
  int64_t max_measured_total() const { return max_measured_; }
  int64_t max_bar_total() const { return std::max(max_measured_, max_accounting_); }

 private:
  struct PerRank {
    std::optional<uint32_t> peak;        // sample index
    std::optional<uint32_t> accounting;  // sample index
    size_t measured = 0;
  };
  struct Stage {
    std::string name;
    int64_t first_us = 0;
    uint32_t order = 0;  // when it was first seen
    std::map<int, PerRank> ranks;
  };
  const Stage* find_stage(const std::string& name) const;
  const PerRank* find(const std::string& stage, int rank) const;

  std::vector<MemorySample> samples_;
  std::vector<Stage> stages_;
  std::map<std::string, uint32_t> stage_index_;
  std::map<int, std::vector<MemoryPoint>> timelines_;
  int64_t max_measured_ = 0;
  int64_t max_accounting_ = 0;
};

}  // namespace distlab::viz
