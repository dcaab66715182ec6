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
//    "links": [{"backend": "threads", "collective": "p2p", "ranks": 2, "alpha_s": 1e-5, "beta_s_per_byte": 1e-10}, ...],
//    "sharing": [{"ranks": 1, "slowdown": 1.0}, {"ranks": 8, "slowdown": 4.1}]}
//
//   matmul       FLOP/s of (m x k) by (k x n) products on one rank's
//                threads, the shapes the layers use, by precision
//   elementwise  bytes a second an element-wise operation reads and writes
//   op_seconds   what one small operation costs whatever its size (the
//                dispatch): at the capstone's sizes most of a step
//   links        alpha-beta (collectives/cost_model.hpp) per backend, per
//                operation (p2p, all_reduce, all_gather, reduce_scatter)
//                and group size
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

inline constexpr int kProfileVersion = 1;

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
};

struct SharingPoint {
  int ranks = 1;
  double slowdown = 1;
};

struct Profile {
  std::string date, machine, libtorch, device = "cpu";
  int cores = 1;
  std::vector<MatmulPoint> matmul;
  double elementwise_bytes_per_second = 0;
  double op_seconds = 0;
  std::vector<LinkPoint> links;
  std::vector<SharingPoint> sharing;

  // FLOP/s for (m x k)(k x n): the measured shape with this k and n
  // interpolated in log m, else the nearest measured size; throws
  // ProfileError when the precision was never measured.
  double matmul_flops(int64_t m, int64_t k, int64_t n, const std::string& precision) const;
  // alpha-beta of `collective` over `ranks` on `backend`: that group size,
  // else the nearest measured one; throws ProfileError when none.
  collectives::LinkParams link(const std::string& backend, const std::string& collective, int ranks) const;
  // The slowdown of each of `ranks` busy ranks, interpolated; 1 at or below
  // the cores when not measured.
  double slowdown(int ranks) const;
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
