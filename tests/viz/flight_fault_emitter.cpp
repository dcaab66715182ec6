// A faulty job traced to a file with the flight recorder on, for the Trace
// panel's flight view: the flight tests' injected faults (tests/flight/
// faults.hpp, run_fault, linked from there) on thread ranks with a short
// timeout. DIR gets trace.json (the library's sink) and flight.rank<R>.json
// (written by the recorder when the waits time out).
//
//   viz_flight_fault_emitter --dir /tmp/f --fault skip --culprit 2 --ranks 4 --timeout-ms 500
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "comm/threads_backend.hpp"
#include "faults.hpp"
#include "flight/recorder.hpp"
#include "trace/chrome_json.hpp"

int main(int argc, char** argv) {
  using namespace distlab;
  std::string dir, fault = "skip";
  int culprit = 2, ranks = 4, timeout_ms = 500;
  CLI::App app{"a faulty job on thread ranks, traced, with flight-recorder files"};
  app.add_option("--dir", dir, "where trace.json and flight.rank<R>.json go")->required();
  app.add_option("--fault", fault, "skip, order, shape or dead (tests/flight/faults.hpp)")
      ->check(CLI::IsMember({"skip", "order", "shape", "dead"}));
  app.add_option("--culprit", culprit)->check(CLI::Range(0, 15));
  app.add_option("--ranks", ranks)->check(CLI::Range(2, 16));
  app.add_option("--timeout-ms", timeout_ms)->check(CLI::Range(50, 60000));
  CLI11_PARSE(app, argc, argv);
  if (culprit >= ranks) {
    std::fprintf(stderr, "--culprit %d: there are only %d ranks\n", culprit, ranks);
    return 2;
  }

  // The trace and the flight files go into DIR: a new folder is made, as
  // the README's first run asks for one.
  std::error_code made;
  std::filesystem::create_directories(dir, made);
  if (made) {
    std::fprintf(stderr, "--dir %s: cannot create the folder (%s)\n", dir.c_str(), made.message().c_str());
    return 2;
  }

  auto recorder = std::make_shared<trace::Recorder>();
  recorder->add_sink(std::make_shared<trace::ChromeJsonSink>(dir + "/trace.json"));
  comm::CommOptions options;
  options.recorder = recorder;
  options.timeout = std::chrono::milliseconds(timeout_ms);
  options.flight = flight::Recorder::create({flight::kDefaultEntries, dir});
  std::string error = "none";
  try {
    comm::run_thread_ranks(ranks, [&](comm::Communicator& comm) { flight_test::run_fault(comm, fault, culprit); },
                           options);
  } catch (const comm::CommError& e) {
    error = e.what();
  }
  options.recorder.reset();
  recorder.reset();  // the sink closes the file
  std::printf("wrote %s/trace.json and the flight files; fault %s by rank %d; the job's error: %s\n", dir.c_str(),
              fault.c_str(), culprit, error.c_str());
  return 0;
}
