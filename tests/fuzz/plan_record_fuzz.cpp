// The visualizer's reader of plan records (viz/plan_model.hpp, what
// distlab-plan --record writes): refused with a PlanFormatError naming
// what is wrong, or read; a record read answers every question the Plan
// panel asks of it (each layout's errors, its bars, the scores, the
// largest bar, the summary) without a crash, and the sniffer that tells a
// plan from a trace decides any beginning of any bytes.
#include <cstdint>
#include <string>

#include "plan_model.hpp"

using namespace distlab::viz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)looks_like_plan_record(text);
  (void)looks_like_plan_record(std::string_view(text).substr(0, size / 2));
  PlanRecord record;
  try {
    record = read_plan_text(text);
  } catch (const PlanFormatError&) {
    return 0;
  }
  for (const PlanLayout& layout : record.layouts) {
    if (layout.ran()) {
      (void)layout.error();
      (void)layout.memory_error();
    }
    for (const PlanRankMemory& rank : layout.memory) (void)rank.stacked();
  }
  (void)record.scores();
  (void)record.max_rank_bytes();
  (void)record.summary();
  return 0;
}
