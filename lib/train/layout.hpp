// Where a rank sits in a job of several parallel dimensions, and its groups.
//
// The job's ranks form a grid with one axis per dimension, outermost first:
//
//   data      R replicas of the whole model (DDP or ZeRO within a stage's replicas)
//   pipeline  P stages per model (activations travel along it)
//   context   C ranks splitting every sequence (ring attention within
//             each layer; cut_layers.hpp)
//   tensor    T ranks cutting each stage's layers (innermost: the chattiest
//             group, four all-reduces per layer, on one node)
//
// A rank's number is its place read as a mixed-radix number, outermost
// digit first: rank = ((replica * P + stage) * C + context) * T + tensor
// (Megatron's order too: tensor innermost, then context, data, pipeline
// outermost but for data). 2 x 2 (C = T = 1):
//
//                 stage 0   stage 1
//   replica 0     rank 0 -> rank 1      pipeline group {0, 1}
//   replica 1     rank 2 -> rank 3      pipeline group {2, 3}
//                 replica   replica
//                 group     group
//                 {0, 2}    {1, 3}
//
// The group along an axis holds the ranks that differ only there: with
// 2 x 2 x 2, tensor rank k of a stage talks to tensor rank k of the next
// stage (pipeline group {k, k+2} in replica 0) and to tensor rank k of the
// same stage in the other replica (replica group {0, 4}: DDP averages the
// same cut of the same matrices). 1 x R is plain DDP, P x 1 a plain
// pipeline; T = 1 is the two-dimensional layout rank for rank.
//
// A new dimension is one more Axis (in kAxes, at its place in the order),
// its size in Layout, its coordinate in Place and its group's name in
// layout.cpp: place_of, rank_of, group_members and make_groups follow.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace distlab::train {

enum class Axis { kData, kPipeline, kContext, kTensor };  // numbered 0 .. 3: layout.cpp's tables
// Outermost first: the order of the digits of a rank's number.
inline constexpr std::array<Axis, 4> kAxes = {Axis::kData, Axis::kPipeline, Axis::kContext, Axis::kTensor};
const char* axis_name(Axis axis);  // "data", "pipeline", "context", "tensor"

struct Layout {
  int pipeline = 2;  // P: stages per model
  int replicas = 2;  // R: data-parallel copies of the pipeline
  int tensor = 1;    // T: ranks that cut each stage's layers
  int context = 1;   // C: ranks that split each sequence
  int size(Axis axis) const;
  int world_size() const;
  std::string text() const;  // "2 stages x 2 replicas", "... x 2 context ranks x 2 tensor ranks"
};

struct Place {
  int stage = 0;
  int replica = 0;
  int tensor = 0;  // this rank's place in its stage's tensor group
  int context = 0;  // which share of each sequence this rank holds
  int at(Axis axis) const;
  int& at(Axis axis);
};

// Throws std::invalid_argument unless 0 <= world_rank < layout.world_size().
Place place_of(int world_rank, const Layout& layout);
int rank_of(const Place& place, const Layout& layout);

// Every group along `axis`, each as its world ranks in group-rank order;
// the groups in the order of the other coordinates (outermost first).
std::vector<std::vector<int>> group_members(const Layout& layout, Axis axis);

// data x context: the ranks holding the same stage and tensor piece, over
// which a stage's gradients average. Group rank = replica * C + context;
// one group per (stage, tensor rank), in that order. With C = 1, the data
// groups.
struct AveragingPlace {
  int group = 0;  // stage * T + tensor
  int rank = 0;   // replica * C + context
};
AveragingPlace averaging_place(const Place& place, const Layout& layout);
std::vector<std::vector<int>> averaging_members(const Layout& layout);

// Experts spread over N ranks (expert parallelism): each averaging group cut
// into blocks of N consecutive group ranks, as Megatron's expert groups
// subdivide data x context. Averaging rank r sits in block r / N at
// position r % N, and holds the same experts as every rank of its averaging
// group at the same position: its copies, whose gradients are summed.
// N must divide R * C (the plan's rule).
struct ExpertPlace {
  int block = 0;  // r / N: the expert group, within the averaging group
  int copy = 0;   // r % N: which experts, and the group of their copies
};
ExpertPlace expert_place(int averaging_rank, int experts_over);
std::vector<std::vector<int>> expert_members(const Layout& layout, int experts_over);       // the blocks
std::vector<std::vector<int>> expert_copy_members(const Layout& layout, int experts_over);  // the copies

struct Groups {
  Place place;
  std::unique_ptr<comm::Communicator> pipeline;  // this replica's P stages (same tensor rank), group rank = stage
  std::unique_ptr<comm::Communicator> replica;   // this stage's R replicas (same tensor rank), group rank = replica
  std::unique_ptr<comm::Communicator> tensor;    // this stage's T tensor ranks, group rank = tensor
  std::unique_ptr<comm::Communicator> context;   // this stage's C context ranks (same replica and tensor rank)
  // data x context (same stage and tensor rank), group rank = replica * C +
  // context: what the stage's gradients average over. Split only when C > 1.
  std::unique_ptr<comm::Communicator> replicas_and_context;
  comm::Communicator& along(Axis axis) const;
  comm::Communicator& averaging() const { return replicas_and_context ? *replicas_and_context : *replica; }
};

// Every rank of `world` calls it (one comm.split per axis). Throws
// std::invalid_argument with a hint when world.size() != P * R * C * T.
Groups make_groups(comm::Communicator& world, const Layout& layout);

}  // namespace distlab::train
