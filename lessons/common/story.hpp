// The slides' story, as lessons 02-05 tell it: how much data, over the
// story's link (1 MB/s), and with --calibrate over the link measured on
// this backend too. compare.hpp puts the predictions for both beside the
// measured times.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "collectives/calibrate.hpp"
#include "collectives/cost_model.hpp"
#include "comm/communicator.hpp"

namespace distlab::lessons {

// The story's numbers, whether to measure this machine's link too, and how
// many timed calls.
struct StoryOptions {
  double mb = 5;             // the data each rank holds or sends, MB (10^6 bytes)
  double link_mb_per_s = 1;  // the story's link
  bool calibrate = false;
  int iters = 5;             // timed calls (lesson 02: rounds, the best is shown)

  int64_t bytes() const { return static_cast<int64_t>(mb * 1e6); }
};

// size_flag: "--mb", or lesson 02's "--file-mb".
inline void add_story_flags(CLI::App& app, StoryOptions& o, const std::string& size_flag,
                            const std::string& size_help) {
  app.add_option(size_flag, o.mb, size_help + ", MB")->check(CLI::Range(1e-5, 4096.0))->capture_default_str();
  app.add_option("--link-mb-per-s", o.link_mb_per_s, "the story's link speed, MB/s")->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--calibrate", o.calibrate, "measure latency and bandwidth here and predict with them too");
  app.add_option("--iters", o.iters, "timed calls per algorithm")->check(CLI::Range(1, 10000))->capture_default_str();
}

struct Links {
  collectives::LinkParams story;                // the slides' link
  std::optional<collectives::LinkParams> here;  // measured by calibrate(), if asked for
};

// Every rank calls this: calibrate() is a collective (ranks 0 and 1 play
// ping-pong, then rank 0 tells everybody what it measured).
inline Links links_for(comm::Communicator& comm, const StoryOptions& o) {
  Links links{{/*alpha_s=*/0, /*beta_s_per_byte=*/1 / (o.link_mb_per_s * 1e6)}, std::nullopt};
  if (o.calibrate) links.here = collectives::calibrate(comm, {3, 20, 4 << 20, comm.device()});
  return links;
}

}  // namespace distlab::lessons
