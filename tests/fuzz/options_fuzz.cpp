// The plan's and the planner's option readers: the names and forms a user
// types on a command line (--schedule, --actions, --algorithm, --reduce,
// --precision, --recompute, --context-method, --memory-per-rank,
// --trace-live). Each refuses a bad word with the exception its header
// names; a word read is written back and read again to the same value.
// The first byte picks the reader.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "collectives/plan.hpp"
#include "comm/reduce_op.hpp"
#include "context_parallel/context_attention.hpp"
#include "memory/precision.hpp"
#include "memory/recompute.hpp"
#include "pipeline/action.hpp"
#include "pipeline/schedule.hpp"
#include "planner/memory_model.hpp"
#include "trace/live_stream.hpp"

using namespace distlab;

namespace {

void check(bool ok, const char* what, const std::string& text) {
  if (ok) return;
  std::fprintf(stderr, "options_fuzz: %s: '%s'\n", what, text.c_str());
  std::abort();
}

void read_word(uint8_t which, const std::string& text) {
  switch (which % 10) {
    case 0: {
      const auto actions = pipeline::parse_actions(text);
      const std::string written = pipeline::to_string(actions);
      check(pipeline::to_string(pipeline::parse_actions(written)) == written, "actions written and read differ", text);
      break;
    }
    case 1: {
      const auto kind = pipeline::parse_kind(text);
      check(pipeline::parse_kind(pipeline::kind_name(kind)) == kind, "schedule name read back otherwise", text);
      break;
    }
    case 2: {
      const auto c = collectives::parse_collective(text);
      check(collectives::parse_collective(collectives::to_string(c)) == c, "collective read back otherwise", text);
      break;
    }
    case 3: {
      const auto a = collectives::parse_algorithm(text);
      check(collectives::parse_algorithm(collectives::to_string(a)) == a, "algorithm read back otherwise", text);
      break;
    }
    case 4: {
      const auto op = comm::parse_reduce_op(text);
      check(comm::parse_reduce_op(comm::to_string(op)) == op, "reduce op read back otherwise", text);
      break;
    }
    case 5: memory::precision_from(text); break;
    case 6: memory::recompute_from(text); break;
    case 7: {
      const auto m = context_parallel::method_from_string(text);
      check(context_parallel::method_from_string(context_parallel::to_string(m)) == m, "method read back otherwise",
            text);
      break;
    }
    case 8: {
      const int64_t bytes = planner::parse_bytes(text);
      check(bytes >= 0, "a size read as negative", text);
      check(planner::parse_bytes(std::to_string(bytes)) == bytes, "a size read back otherwise", text);
      break;
    }
    case 9: trace::parse_host_port(text); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    read_word(data[0], text);
  } catch (const pipeline::ScheduleError&) {
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
