#include "train/layout.hpp"

#include <stdexcept>

namespace distlab::train {

std::string Layout::text() const {
  return std::to_string(pipeline) + (pipeline == 1 ? " stage x " : " stages x ") + std::to_string(replicas) +
         (replicas == 1 ? " replica" : " replicas");
}

Place place_of(int world_rank, const Layout& layout) {
  if (layout.pipeline < 1 || layout.replicas < 1 || world_rank < 0 || world_rank >= layout.world_size())
    throw std::invalid_argument("rank " + std::to_string(world_rank) + " is not in a layout of " + layout.text());
  return Place{world_rank % layout.pipeline, world_rank / layout.pipeline};
}

Groups make_groups(comm::Communicator& world, const Layout& layout) {
  if (layout.pipeline < 1 || layout.replicas < 1 || world.size() != layout.world_size())
    throw std::invalid_argument(world.self() + ": a layout of " + layout.text() + " needs " +
                                std::to_string(layout.world_size()) + " ranks, the job has " +
                                std::to_string(world.size()) +
                                " (hint: --ranks P*R with threads, or as many processes under distlab-run)");
  Groups g;
  g.place = place_of(world.rank(), layout);
  g.pipeline = world.split(g.place.replica, g.place.stage, "pipeline" + std::to_string(g.place.replica));
  g.replica = world.split(g.place.stage, g.place.replica, "stage" + std::to_string(g.place.stage) + "-replicas");
  return g;
}

}  // namespace distlab::train
