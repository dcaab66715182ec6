// Where a rank sits in a pipeline x data-parallel job, and its two groups.
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
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.hpp"

namespace distlab::train {

struct Layout {
  int pipeline = 2;  // P: stages per model
  int replicas = 2;  // R: data-parallel copies of the pipeline
  int world_size() const { return pipeline * replicas; }
  std::string text() const;  // "2 stages x 2 replicas"
};

struct Place {
  int stage = 0;
  int replica = 0;
};

// Throws std::invalid_argument unless 0 <= world_rank < layout.world_size().
Place place_of(int world_rank, const Layout& layout);

struct Groups {
  Place place;
  std::unique_ptr<comm::Communicator> pipeline;  // this replica's P stages, group rank = stage
  std::unique_ptr<comm::Communicator> replica;   // this stage's R replicas, group rank = replica
};

// Every rank of `world` calls it (two comm.split collectives). Throws
// std::invalid_argument with a hint when world.size() != P * R.
Groups make_groups(comm::Communicator& world, const Layout& layout);

}  // namespace distlab::train
