#include "comm/intra_op_threads.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "comm/errors.hpp"

namespace distlab::comm {

IntraOpThreads choose_intra_op_threads(int local_ranks) {
  if (const char* text = std::getenv("DISTLAB_INTRA_OP_THREADS")) {
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 1)
      throw SetupError(std::string("DISTLAB_INTRA_OP_THREADS must be a positive number, got '") + text + "'");
    return {static_cast<int>(value), std::string("DISTLAB_INTRA_OP_THREADS=") + text};
  }
  if (const char* text = std::getenv("OMP_NUM_THREADS")) {
    const long value = std::strtol(text, nullptr, 10);
    if (value >= 1) return {static_cast<int>(value), std::string("OMP_NUM_THREADS=") + text};
  }
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  const int ranks = std::max(1, local_ranks);
  return {std::max(1, cores / ranks),
          std::to_string(cores) + " core(s) / " + std::to_string(ranks) + " rank(s) on this machine"};
}

void set_intra_op_threads(const IntraOpThreads& choice) { at::set_num_threads(choice.threads); }

}  // namespace distlab::comm
