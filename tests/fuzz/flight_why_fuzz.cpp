// distlab-trace why (flight/why.hpp): a folder of flight dumps and
// distlab-run's exit records, up to six files cut from the input at the
// separator line (fuzz_input.hpp); bit i of the first byte makes piece i
// the exit record of rank i, else its flight dump. Reading never throws
// (a bad file is one line of `refused`), nor does the diagnosis.
#include <string>

#include "flight/exit_file.hpp"
#include "flight/why.hpp"
#include "fuzz_input.hpp"

using namespace distlab::flight;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const unsigned exits = data[0];
  const std::string dir = distlab::fuzz::scratch_folder("why");
  int rank = 0;
  for (const std::string& piece : distlab::fuzz::pieces(data + 1, size - 1, 6)) {
    const bool exit = (exits >> rank) & 1u;
    distlab::fuzz::write_bytes(exit ? exit_path(dir, rank) : dump_path(dir, rank), piece);
    ++rank;
  }
  const Diagnosis diagnosis = diagnose_files({dir});
  to_text(diagnosis);
  return 0;
}
