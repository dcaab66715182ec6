// The command line of distlab-viz (one struct, parsed by CLI11).
//
//   distlab-viz [--panel collectives|trace|pipeline|ddp|memory|context|experts|wire|plan] [--trace FILE...]
//     [--flight PATH...] [--listen PORT] [--bind ADDR] [--collective all_reduce] [--algorithms ring,tree,...]
//     [--uneven]
//     [--ranks N] [--bytes N] [--alpha S] [--beta S] [--step K] [--time S]
//     [--preset friends] [--view-ms A:B] [--arrows all|selected|none]
//     [--schedule 1f1b,... --stages P --microbatches M --chunks V --forward S
//      --backward S --weight S --send S]
//     [--model mlp|reordered --layers N,N,... --bucket-mb MB --first-bucket-mb MB
//      --backward-gbps G --no-sync K]
//     [--cp-ranks C --cp-length S --cp-step K] [--experts-label LABEL --experts-step N]
//     [--wire-ring S->D --wire-sample N] [--plan FILE]
//     [--screenshot FILE.png --width W --height H] [--scale F]
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace distlab::viz {

struct Options {
  std::string panel = "collectives";  // "trace" when --trace, --flight or --listen is given without --panel,
                                      // "plan" when --plan is

  // Trace panel.
  std::vector<std::string> trace_files;  // one per rank, or one for all
  // Flight-recorder files or directories of flight.rank*.json; empty: those
  // beside the trace files, if any.
  std::vector<std::string> flight_paths;
  int listen_port = -1;                  // -1: not listening; 0: any free port
  std::string bind = "127.0.0.1";
  std::string view_ms;                   // "A:B": the visible window, ms after the first event
  std::string arrows = "all";            // send->recv arrows: all, selected, none

  // Collectives panel.
  std::string collective = "all_reduce";
  std::string algorithms;  // comma-separated, at most 3; empty: every algorithm of the collective
  int ranks = 8;
  int64_t bytes = 64 << 20;
  double alpha = 5e-6;      // seconds per message
  double beta = 1.0 / 10e9; // seconds per byte (10 GB/s)
  int step = -1;            // put the cursor in the middle of this step of the first algorithm
  double time_s = -1.0;     // or at this time
  std::string preset;       // "friends": 5 MB to 7 friends at 1 MB/s
  bool uneven = false;      // all_to_all: the example's uneven counts (all-to-all-v)

  // Pipeline panel (costs in seconds, for one rank's share of the model).
  std::string schedule = "gpipe,1f1b";  // 1 to 4, comma-separated
  int pipeline_stages = 4;              // p
  int microbatches = 8;                 // m
  int chunks = 2;                       // v, for interleaved and looped_bfs
  double cost_forward = 1.0;
  double cost_backward = 2.0;
  double cost_weight = 1.0;
  double cost_send = 0.0;

  // DDP panel (ranks, alpha and beta as for the collectives).
  std::string model = "mlp";       // preset model: mlp, reordered
  std::string layers;              // or parameter counts, comma-separated, registration order
  double bucket_mb = 25.0;         // bucket cap, MiB (PyTorch's default)
  double first_bucket_mb = 1.0;
  double backward_gbps = 4.0;      // gradient bytes backward produces per second, GB/s
  int no_sync = 0;                 // micro-steps without communication before the synchronized one

  // Context parallel panel (ring attention's blocks).
  int cp_ranks = 4;           // C
  int64_t cp_length = 4096;   // S, rounded up to a multiple of 2C
  int cp_step = -1;           // the ring step highlighted; -1: every step

  // Experts panel.
  std::string experts_label;  // the counter's label shown first ("layer 0"); empty: the first in the trace
  int experts_step = 1;       // 1-based; past the last: the last

  // Wire panel.
  std::string wire_ring;  // "S->D" or "S->D (LABEL)", the ring shown first; empty: the first in the trace
  int wire_sample = 1;    // 1-based; past the last: the last; 0: the most bytes in flight

  // Plan panel.
  std::string plan_file;  // a record of distlab-plan --record (plan_model.hpp)

  // Output.
  std::string screenshot;  // render one frame headless to this PNG and exit
  int width = 1600;
  int height = 900;
  float scale = 1.0f;  // text and widget size, for a projector
};

// Parses argv. Returns an exit code when the program should stop (--help:
// 0, a bad flag: 2, after printing why), nothing when it should run.
std::optional<int> parse_options(int argc, const char* const* argv, Options& options);

// Fills what --preset names. Throws std::invalid_argument for an unknown preset.
void apply_preset(Options& options);

// "12.5:40" -> (12.5, 40); throws std::invalid_argument.
std::pair<double, double> parse_range(const std::string& text);

}  // namespace distlab::viz
