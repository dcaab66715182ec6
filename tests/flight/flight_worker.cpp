// One rank of the flight recorder's multi-process tests (gloo_test.cpp):
//
//   DISTLAB_FLIGHT_DIR=out distlab-run --nproc-per-node 3 --timeout-ms 1500 -- \
//     flight_worker --fault skip --culprit 1
//
// --culprit 3 (or more) on 3 ranks injects nothing: the job ends cleanly.
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <thread>

#include "comm/job.hpp"
#include "comm/job_cli.hpp"
#include "faults.hpp"

int main(int argc, char** argv) {
  CLI::App app{"A rank of the flight recorder tests"};
  distlab::comm::JobOptions job;
  job.backend = "gloo";
  distlab::comm::add_job_flags(app, job);
  std::string fault = "skip";
  int culprit = 1;
  app.add_option("--fault", fault, "skip | order | shape | dead | p2p")
      ->check(CLI::IsMember({"skip", "order", "shape", "dead", "p2p"}));
  app.add_option("--culprit", culprit, "the rank that does it (none: past the last rank)");
  CLI11_PARSE(app, argc, argv);
  try {
    distlab::comm::run_job(distlab::comm::with_env_defaults(job), [&](distlab::comm::Communicator& comm) {
      distlab::flight_test::run_fault(comm, fault, culprit);
      // A rank whose part is over while others wait (the skipping rank; all
      // but the waiting one after p2p) stays alive, busy elsewhere, past
      // their timeout, as a rank stuck in its own work would; the launcher
      // stops it when the waiting rank fails. Without a fault, all return.
      if (culprit < comm.size()) std::this_thread::sleep_for(4 * comm.timeout());
    });
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
