#include "options.hpp"

#include <CLI/CLI.hpp>

#include <iostream>
#include <stdexcept>

#include "pipeline/schedule.hpp"
#include "pipeline_panel.hpp"
#include "trace_loader.hpp"
#include "wire_model.hpp"

namespace distlab::viz {

namespace {

// Every schedule the Pipeline panel takes, as --schedule spells it.
std::string schedule_names() {
  std::string names;
  for (pipeline::ScheduleKind kind : pipeline::all_kinds())
    names += (names.empty() ? "" : ", ") + std::string(pipeline::kind_name(kind));
  return names;
}

}  // namespace

void apply_preset(Options& o) {
  if (o.preset.empty()) return;
  if (o.preset == "friends") {
    // The slides: rank 0 sends a 5 MB file to 7 friends over 1 MB/s links.
    // One after another it takes 7 x 5 s = 35 s; as a binomial tree every
    // rank that has the file passes it on, 3 rounds of 5 s = 15 s.
    o.panel = "collectives";
    o.collective = "broadcast";
    o.algorithms = "sequential,tree";
    o.ranks = 8;
    o.bytes = 5'000'000;
    o.alpha = 0.0;
    o.beta = 1e-6;
    return;
  }
  throw std::invalid_argument("unknown preset '" + o.preset + "' (known: friends)");
}

std::pair<double, double> parse_range(const std::string& text) {
  const auto colon = text.find(':');
  try {
    if (colon != std::string::npos) {
      size_t used_a = 0;
      size_t used_b = 0;
      const std::string a = text.substr(0, colon);
      const std::string b = text.substr(colon + 1);
      const double begin = std::stod(a, &used_a);
      const double end = std::stod(b, &used_b);
      if (used_a == a.size() && used_b == b.size() && end > begin) return {begin, end};
    }
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("expected BEGIN:END with END > BEGIN (milliseconds), got '" + text + "'");
}

std::optional<int> parse_options(int argc, const char* const* argv, Options& o) {
  CLI::App app{"distlab-viz: collectives animated from the cost model, trace timelines (file or live) with "
               "flight-recorder files, pipeline schedules, DDP buckets, memory per rank under DDP and ZeRO, "
               "ring attention's blocks per rank, tokens per expert step by step, the same-host transport's "
               "ring, and distlab-plan's layouts predicted against measured"};
  CLI::Option* panel = app.add_option("--panel", o.panel, "Panel to show; memory: each rank's measured peak beside the ZeRO accounting, from --trace or --listen; "
                                          "context: ring attention's blocks, contiguous and zigzag; "
                                          "experts: tokens per expert per step and those dropped, from --trace; "
                                          "wire: the same-host ring's head and tail, from --trace; "
                                          "plan: distlab-plan's layouts, predicted against measured, from --plan "
                                          "(default: trace with --trace, --flight or --listen, plan with --plan, "
                                          "else collectives)")
                           ->check(CLI::IsMember({"collectives", "trace", "pipeline", "ddp", "context", "experts",
                                                  "wire", "plan", "memory"}));
  app.add_option("--trace", o.trace_files, "Chrome trace JSON file(s) written by DistLab (one per rank, or one)");
  app.add_option("--flight", o.flight_paths,
                 "Flight-recorder files, or directories of flight.rank*.json: each rank's last operations on the "
                 "Trace panel, the finding of distlab-trace why marked where the ranks part ways (without --trace: "
                 "the flight files alone; with --trace and no --flight, those beside the trace file are opened)");
  app.add_option("--listen", o.listen_port, "Receive live events on this TCP port (0: any free port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--bind", o.bind, "Address the live listener binds to (loopback unless told otherwise)");
  app.add_option("--view-ms", o.view_ms, "Trace window shown, BEGIN:END in ms after the first event");
  app.add_option("--arrows", o.arrows, "send->recv arrows")->check(CLI::IsMember({"all", "selected", "none"}));
  app.add_option("--collective", o.collective, "broadcast, reduce, all_reduce or all_to_all")
      ->check(CLI::IsMember({"broadcast", "reduce", "all_reduce", "all-reduce", "all_to_all", "all-to-all"}));
  app.add_option("--algorithms", o.algorithms,
                 "Up to 3, comma-separated: sequential, tree, reduce_broadcast, ring, halving_doubling, pairwise");
  app.add_flag("--uneven", o.uneven, "all_to_all: uneven blocks, some empty (all-to-all-v; the panel's example)");
  app.add_option("--ranks", o.ranks, "World size")->check(CLI::Range(2, 16));
  app.add_option("--bytes", o.bytes, "Message size in bytes")->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--alpha", o.alpha, "Latency per message, seconds")->check(CLI::Range(0.0, 1e6));
  app.add_option("--beta", o.beta, "Seconds per byte (1 / bandwidth)")->check(CLI::Range(0.0, 1e6));
  app.add_option("--step", o.step, "Show this step (0-based) of the first algorithm")->check(CLI::Range(0, 1 << 20));
  app.add_option("--time", o.time_s, "Put the time cursor here, seconds")->check(CLI::Range(0.0, 1e12));
  app.add_option("--preset", o.preset, "friends: the slides' 5 MB file sent to 7 friends at 1 MB/s")
      ->check(CLI::IsMember({"friends"}));
  app.add_option("--schedule", o.schedule,
                 "Pipeline: 1 to " + std::to_string(kMaxSchedulesSideBySide) + " of " + schedule_names() +
                     " (comma-separated)");
  app.add_option("--stages", o.pipeline_stages, "Pipeline: ranks p (one stage each, v with --chunks)")->check(CLI::Range(1, 16));
  app.add_option("--microbatches", o.microbatches, "Pipeline: microbatches m")->check(CLI::Range(1, 256));
  app.add_option("--chunks", o.chunks, "Pipeline: stages per rank v (interleaved, looped_bfs, interleaved_zb; zbv and dualpipev hold 2)")->check(CLI::Range(1, 8));
  app.add_option("--forward", o.cost_forward, "Pipeline: seconds of forward, one rank's share, one microbatch")->check(CLI::Range(0.0, 1e6));
  app.add_option("--backward", o.cost_backward, "Pipeline: seconds of full backward (I + W)")->check(CLI::Range(0.0, 1e6));
  app.add_option("--weight", o.cost_weight, "Pipeline: seconds of the weight-gradient part W (zero-bubble)")->check(CLI::Range(0.0, 1e6));
  app.add_option("--send", o.cost_send, "Pipeline: seconds per message between ranks")->check(CLI::Range(0.0, 1e6));
  app.add_option("--model", o.model, "DDP: preset model")->check(CLI::IsMember({"mlp", "reordered"}));
  app.add_option("--layers", o.layers, "DDP: parameter counts in registration order, comma-separated (instead of --model)");
  app.add_option("--bucket-mb", o.bucket_mb, "DDP: bucket cap in MiB (0: one bucket per parameter)")->check(CLI::Range(0.0, 1e5));
  app.add_option("--first-bucket-mb", o.first_bucket_mb, "DDP: the first bucket's cap in MiB")->check(CLI::Range(0.0, 1e5));
  app.add_option("--backward-gbps", o.backward_gbps, "DDP: gradient GB/s backward produces")->check(CLI::Range(1e-6, 1e6));
  app.add_option("--no-sync", o.no_sync, "DDP: micro-steps under no_sync before the synchronized one")->check(CLI::Range(0, 64));
  app.add_option("--cp-ranks", o.cp_ranks, "Context parallel: ranks C")->check(CLI::Range(1, 8));
  app.add_option("--cp-length", o.cp_length, "Context parallel: sequence length S in tokens (rounded up to a multiple of 2C)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--cp-step", o.cp_step, "Context parallel: highlight the blocks of this ring step (-1: every step)")
      ->check(CLI::Range(-1, 7));
  app.add_option("--experts-label", o.experts_label,
                 "Experts: the counter shown first, \"experts LABEL\" (a layer, \"layer 0\", or a run)");
  app.add_option("--experts-step", o.experts_step, "Experts: the step shown first (1-based; past the last: the last)")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--wire-ring", o.wire_ring,
                 "Wire: the ring shown first, \"S->D\" (rank S writes, rank D reads; the busiest of that pair) or "
                 "\"S->D (LABEL)\" as the panel names it");
  app.add_option("--wire-sample", o.wire_sample,
                 "Wire: the sample shown first (1-based; past the last: the last; 0: the one with the most bytes in "
                 "flight)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--plan", o.plan_file,
                 "Plan: a record of `distlab-plan --record FILE`: each measured layout's step time against the "
                 "prediction, a layout's predicted memory per pipeline rank");
  app.add_option("--screenshot", o.screenshot, "Render headless (no display needed) to this PNG and exit");
  app.add_option("--width", o.width, "Screenshot width")->check(CLI::Range(320, 8192));
  app.add_option("--height", o.height, "Screenshot height")->check(CLI::Range(240, 8192));
  app.add_option("--scale", o.scale, "Size of text and widgets (projector: 1.5)")->check(CLI::Range(0.5f, 4.0f));
  try {
    app.parse(argc, argv);
    // A job of several processes writes X.rank0.json, X.rank1.json, ... for
    // --trace X.json: the name the program was given opens them all.
    for (const std::string& line : open_rank_files_instead(o.trace_files)) std::cerr << "distlab-viz: " << line << "\n";
    // Opening a trace means looking at it: the Trace panel, unless told.
    if (panel->count() == 0 && (!o.trace_files.empty() || !o.flight_paths.empty() || o.listen_port >= 0))
      o.panel = "trace";
    // And opening a plan, at the plan.
    else if (panel->count() == 0 && !o.plan_file.empty())
      o.panel = "plan";
    apply_preset(o);
    if (!o.view_ms.empty()) parse_range(o.view_ms);
    if (!o.wire_ring.empty() && !parse_ring_id(o.wire_ring))
      throw std::invalid_argument("--wire-ring: expected S->D or S->D (LABEL) with two different ranks S and D "
                                  "(e.g. 0->1), got '" + o.wire_ring + "'");
    if (o.collective == "all-reduce") o.collective = "all_reduce";
    if (o.collective == "all-to-all") o.collective = "all_to_all";
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::invalid_argument& e) {
    std::cerr << "distlab-viz: " << e.what() << "\n";
    return 2;
  }
  return std::nullopt;
}

}  // namespace distlab::viz
