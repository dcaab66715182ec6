#include "train/layout.hpp"

#include <stdexcept>

namespace distlab::train {

std::string Layout::text() const {
  const std::string two = std::to_string(pipeline) + (pipeline == 1 ? " stage x " : " stages x ") +
                          std::to_string(replicas) + (replicas == 1 ? " replica" : " replicas");
  return tensor == 1 ? two : two + " x " + std::to_string(tensor) + " tensor ranks";
}

Place place_of(int world_rank, const Layout& layout) {
  if (layout.pipeline < 1 || layout.replicas < 1 || layout.tensor < 1 || world_rank < 0 ||
      world_rank >= layout.world_size())
    throw std::invalid_argument("rank " + std::to_string(world_rank) + " is not in a layout of " + layout.text());
  const int cell = world_rank / layout.tensor;  // (replica, stage), as in the two-dimensional layout
  return Place{cell % layout.pipeline, cell / layout.pipeline, world_rank % layout.tensor};
}

Groups make_groups(comm::Communicator& world, const Layout& layout) {
  if (layout.pipeline < 1 || layout.replicas < 1 || layout.tensor < 1 || world.size() != layout.world_size())
    throw std::invalid_argument(world.self() + ": a layout of " + layout.text() + " needs " +
                                std::to_string(layout.world_size()) + " ranks, the job has " +
                                std::to_string(world.size()) +
                                " (hint: --ranks P*R*T with threads, or as many processes under distlab-run)");
  Groups g;
  const Place p = g.place = place_of(world.rank(), layout);
  const int T = layout.tensor, P = layout.pipeline;
  // Colors: one per group of each kind; with T = 1 the names are the two-dimensional layout's.
  const std::string k = T == 1 ? "" : "-tensor" + std::to_string(p.tensor);
  g.pipeline = world.split(p.replica * T + p.tensor, p.stage, "pipeline" + std::to_string(p.replica) + k);
  g.replica = world.split(p.stage * T + p.tensor, p.replica, "stage" + std::to_string(p.stage) + "-replicas" + k);
  g.tensor = world.split(p.replica * P + p.stage, p.tensor,
                         "tensor-r" + std::to_string(p.replica) + "s" + std::to_string(p.stage));
  return g;
}

}  // namespace distlab::train
