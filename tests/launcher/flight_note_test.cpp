// Exit records land where each worker noted its flight files
// (DISTLAB_FLIGHT_DIR_NOTE, flight/exit_file.hpp), not where the launcher's
// own rule would put them: a program may choose the folder itself.
#include <gtest/gtest.h>

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "exit_records.hpp"
#include "flight/exit_file.hpp"
#include "launcher_process.hpp"
#include "options.hpp"

namespace distlab::launcher {
namespace {

using testing::fresh_dir;

LaunchOptions two_workers() {
  std::ostringstream help;
  return parse_launch_options({"--nproc-per-node", "2", "prog"}, help).value();
}

TEST(FlightNote, ARecordGoesWhereItsWorkerNotedItsFlightFiles) {
  const LaunchOptions options = two_workers();
  const std::string chosen = fresh_dir("flight_note_chosen");
  std::string notes;
  {
    const ExitRecords records(options, 0);
    const std::string note = records.note_path(1);
    ASSERT_FALSE(note.empty());
    notes = std::filesystem::path(note).parent_path();
    // What worker 1's flight recorder does when it starts.
    ::setenv(flight::kFlightDirNoteVariable, note.c_str(), 1);
    flight::note_flight_dir(chosen);
    ::unsetenv(flight::kFlightDirNoteVariable);

    EXPECT_EQ(records.dir_of(1), chosen);
    EXPECT_EQ(records.dir_of(0), records.dir()) << "rank 0 noted nothing";
    records.record(1, 4242, SIGKILL, /*asked_to_stop=*/false);  // waitpid's status of a SIGKILLed child
    ASSERT_TRUE(std::filesystem::exists(flight::exit_path(chosen, 1)));
    const flight::ExitRecord r = flight::read_exit(flight::exit_path(chosen, 1));
    EXPECT_EQ(r.signal, "SIGKILL");
    EXPECT_EQ(r.pid, 4242);
    EXPECT_FALSE(std::filesystem::exists(flight::exit_path(records.dir(), 1)));
  }
  EXPECT_FALSE(std::filesystem::exists(notes)) << "the notes go with the attempt";
}

}  // namespace
}  // namespace distlab::launcher
