// What a machine can do, measured once (calibrate.hpp) or written by hand
// from a datasheet, and read back by every prediction (step_time.hpp).
//
// A profile is a JSON file:
//   {"format": "distlab-profile", "version": 1,
//    "date": "2026-11-28", "machine": "host", "libtorch": "1.13.0",
//    "device": "cpu", "cores": 2,
//    "matmul": [{"m": 35, "k": 128, "n": 384, "precision": "fp32", "flops_per_second": 2.1e9}, ...],
//    "elementwise_bytes_per_second": 4.0e9,
//    "op_seconds": 4e-6,
//    "links": [{"backend": "threads", "collective": "p2p", "ranks": 2, "world": 8, "alpha_s": 1e-5, "beta_s_per_byte": 1e-10}, ...],
//    "sharing": [{"ranks": 1, "slowdown": 1.0}, {"ranks": 8, "slowdown": 4.1, "precision": "bf16"}],
//    "pieces_model": "d 128, ffn 256, 4 heads, ...",
//    "pieces": [{"piece": "layer", "precision": "fp32", "recompute": "none", "threads": 1,
//                "tokens": 35, "forward_s": 1.1e-3, "backward_s": 2.3e-3,
//                "input_s": 1.4e-3, "weight_s": 1.9e-3},
//               {"piece": "layer", ..., "context": 4, ...}, ...],
//    "updates": [{"piece": "layer", "threads": 1, "seconds": 2e-4}, ...]}
//
//   matmul       FLOP/s of (m x k) by (k x n) products on one rank's
//                threads, the shapes the layers use, by precision
//   elementwise  bytes a second an element-wise operation reads and writes
//   op_seconds   what one small operation costs whatever its size (the
//                dispatch): at the capstone's sizes most of a step
//   links        alpha-beta (collectives/cost_model.hpp) per backend, per
//                operation (p2p, all_reduce, all_gather, reduce_scatter),
//                group size and world (the ranks running meanwhile;
//                optional, the group size when absent); beta per byte of
//                the whole tensor (an all-gather's output, a
//                reduce-scatter's input)
//   sharing      how much slower each of k busy ranks runs than one alone
//                (8 thread ranks on 2 cores: about 4); 1 up to the cores
//
// The reader refuses bad bytes with one line naming what is wrong: not
// JSON, another format or version, a missing or ill-typed field, a number
// that is not positive and finite.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/cost_model.hpp"

namespace distlab::planner {

inline constexpr int kProfileVersion = 2;

struct MatmulPoint {
  int64_t m = 0, k = 0, n = 0;
  std::string precision = "fp32";
  double flops_per_second = 0;
};

struct LinkPoint {
  std::string backend = "threads";
  std::string collective = "p2p";  // p2p, all_reduce, all_gather, reduce_scatter
  int ranks = 2;
  collectives::LinkParams link;
  // Thread ranks running in the process while it was measured: the group
  // and world - ranks others busy computing (on a CPU whose cores they
  // outnumber, a message waits for its peer's turn on a core); 0: the
  // group alone.
  int world = 0;
  int measured_world() const { return world > 0 ? world : ranks; }
};

struct SharingPoint {
  int ranks = 1;
  double slowdown = 1;
  // The precision of the work the ranks ran (optional in the file: fp32):
  // bf16 products share the cores worse than fp32 ones here.
  std::string precision = "fp32";
};

struct PiecePoint {
  std::string piece;                // embedding, layer, decoder
  std::string precision = "fp32";
  std::string recompute = "none";   // the layer's policy; none for the others
  int threads = 1;                  // intra-op threads it ran on
  int64_t tokens = 0;               // a microbatch's: sequence x columns
  double forward_s = 0, backward_s = 0;
  // The backward split as zero-bubble schedules run it (pipeline/executor.hpp):
  // the input's gradient (I), then the parameters' (W), which walks the
  // graph again; 0 when not measured (optional in the file).
  double input_s = 0, weight_s = 0;
  // A layer cut over a tensor group or holding 1/context of each sequence
  // (cut_pieces.hpp), run on tensor x context thread ranks at once, its
  // messages included: a rank's seconds, tokens its own (optional in the
  // file, 1 when absent; only the layer is cut).
  int tensor = 1, context = 1;
  // Ranks running at once while it was measured (copies of the cut side
  // by side; optional, 0 when absent: the cut's own ranks).
  int world = 0;
  bool cut() const { return tensor * context > 1; }
  int measured_world() const { return world > 0 ? world : tensor * context; }
};

// Which cut of a layer: tensor ranks and context ranks (1 x 1: the whole layer).
struct Cut {
  int tensor = 1, context = 1;
};

struct UpdatePoint {
  std::string piece;
  int threads = 1;
  double seconds = 0;
};

// A piece's measured seconds, interpolated.
struct PieceSeconds {
  double forward = 0, backward = 0;
  double input = 0, weight = 0;  // I and W; both 0 when the profile did not split it
};

struct Profile {
  std::string date, machine, libtorch, device = "cpu";
  int cores = 1;
  std::vector<MatmulPoint> matmul;
  double elementwise_bytes_per_second = 0;
  double op_seconds = 0;
  std::vector<LinkPoint> links;
  std::vector<SharingPoint> sharing;
  std::vector<PiecePoint> pieces;
  std::vector<UpdatePoint> updates;
  std::string pieces_model;  // whose pieces they are (pieces.hpp's pieces_model); "" without pieces

  // FLOP/s for (m x k)(k x n): the measured shape with this k and n
  // interpolated in log m, else the nearest measured size; throws
  // ProfileError when the precision was never measured.
  double matmul_flops(int64_t m, int64_t k, int64_t n, const std::string& precision) const;
  // alpha-beta of `collective` over `ranks` on `backend` among `world`
  // busy ranks (0: the group alone): that group size, else the nearest
  // measured one, then the nearest world; throws ProfileError when none.
  collectives::LinkParams link(const std::string& backend, const std::string& collective, int ranks,
                               int world = 0) const;
  // The slowdown of each of `ranks` busy ranks running work in
  // `precision` (fp32's when that one was not measured), interpolated; 1
  // at or below the cores when not measured
  // (a fraction of a rank: ranks busy part of the time on average).
  double slowdown(double ranks, const std::string& precision = "fp32") const;
  // Whether the pieces were measured in this precision and policy.
  bool has_pieces(const std::string& precision, const std::string& recompute) const;
  // Whether a layer cut as `cut` was measured in this precision and policy.
  bool has_cut(const std::string& precision, const std::string& recompute, Cut cut) const;
  // The world a cut layer was measured in nearest `world` (at most it when
  // one was); 0 when the cut was never measured.
  int cut_world(const std::string& precision, const std::string& recompute, Cut cut, int world) const;
  // `piece`'s seconds for a microbatch of `tokens` (a cut layer's: one
  // rank's, measured among `world` ranks: cut_world's), on the measured
  // thread count nearest `threads`: linear in the tokens between the
  // measured sizes and past them along the last two (never below the
  // smallest size's share of it); throws ProfileError when not measured.
  PieceSeconds piece_seconds(const std::string& piece, const std::string& precision, const std::string& recompute,
                             int threads, double tokens, Cut cut = {}, int world = 0) const;
  // `piece`'s update seconds on the thread count nearest `threads`; 0 when
  // not measured.
  double update_seconds(const std::string& piece, int threads) const;
};

class ProfileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string profile_json(const Profile& profile);
// `what` names the source in the message ("profile cpu.json: ...").
Profile parse_profile(const std::string& text, const std::string& what);
Profile read_profile(const std::string& path);    // throws ProfileError
void write_profile(const Profile& profile, const std::string& path);

}  // namespace distlab::planner
