// Where a rank sits in a pipeline x data-parallel (x tensor-parallel) job,
// and its groups.
//
// P pipeline stages x R replicas = P * R ranks. A pipeline is P consecutive
// ranks; stage s of replica r is rank r * P + s. 2 x 2:
//
//                 stage 0   stage 1
//   replica 0     rank 0 -> rank 1      pipeline group {0, 1}
//   replica 1     rank 2 -> rank 3      pipeline group {2, 3}
//                 replica   replica
//                 group     group
//                 {0, 2}    {1, 3}
//
// Activations and their gradients travel inside a pipeline group; each
// stage's gradients are averaged inside its replica group (DDP). 1 x R is
// plain DDP, P x 1 a plain pipeline.
//
// The third dimension, tensor parallelism (T ranks cut each stage's layers,
// tensor_stage.hpp), is the innermost: the T ranks of one stage of one
// replica are consecutive (on one node, where their four all-reduces per
// layer are cheapest), so rank = (r * P + s) * T + k. 2 x 2 x 2: stage 0 of
// replica 0 is ranks {0, 1}, stage 1 {2, 3}; replica 1's stages {4, 5} and
// {6, 7}. Tensor rank k of a stage talks to tensor rank k of the next stage
// (pipeline group {k, k+2} in replica 0) and to tensor rank k of the same
// stage in the other replicas (replica group {0, 4}: DDP averages the same
// cut of the same matrices). T = 1 is the layout above, rank for rank.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.hpp"

namespace distlab::train {

struct Layout {
  int pipeline = 2;  // P: stages per model
  int replicas = 2;  // R: data-parallel copies of the pipeline
  int tensor = 1;    // T: ranks that cut each stage's layers
  int world_size() const { return pipeline * replicas * tensor; }
  std::string text() const;  // "2 stages x 2 replicas", "... x 2 tensor ranks"
};

struct Place {
  int stage = 0;
  int replica = 0;
  int tensor = 0;  // this rank's place in its stage's tensor group
};

// Throws std::invalid_argument unless 0 <= world_rank < layout.world_size().
Place place_of(int world_rank, const Layout& layout);

struct Groups {
  Place place;
  std::unique_ptr<comm::Communicator> pipeline;  // this replica's P stages (same tensor rank), group rank = stage
  std::unique_ptr<comm::Communicator> replica;   // this stage's R replicas (same tensor rank), group rank = replica
  std::unique_ptr<comm::Communicator> tensor;    // this stage's T tensor ranks, group rank = tensor
};

// Every rank of `world` calls it (three comm.split collectives). Throws
// std::invalid_argument with a hint when world.size() != P * R * T.
Groups make_groups(comm::Communicator& world, const Layout& layout);

}  // namespace distlab::train
