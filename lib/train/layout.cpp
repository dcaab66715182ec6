#include "train/layout.hpp"

#include <iterator>
#include <stdexcept>

namespace distlab::train {

namespace {

// Each axis's name and fields, by the axis's number (kData, kPipeline, kContext, kTensor).
constexpr const char* kNameOf[] = {"data", "pipeline", "context", "tensor"};
constexpr int Layout::*kSizeOf[] = {&Layout::replicas, &Layout::pipeline, &Layout::context, &Layout::tensor};
constexpr int Place::*kCoordinateOf[] = {&Place::replica, &Place::stage, &Place::context, &Place::tensor};
constexpr std::unique_ptr<comm::Communicator> Groups::*kGroupOf[] = {&Groups::replica, &Groups::pipeline,
                                                                      &Groups::context, &Groups::tensor};
static_assert(std::size(kNameOf) == kAxes.size() && std::size(kSizeOf) == kAxes.size() &&
              std::size(kCoordinateOf) == kAxes.size() && std::size(kGroupOf) == kAxes.size());

size_t index(Axis axis) { return static_cast<size_t>(axis); }

bool valid(const Layout& layout) {
  for (const Axis axis : kAxes)
    if (layout.size(axis) < 1) return false;
  return true;
}

// The group along `axis` that `place` belongs to: its other coordinates as
// one mixed-radix number, outermost first (the split's color).
int color_of(const Place& place, const Layout& layout, Axis axis) {
  int color = 0;
  for (const Axis other : kAxes)
    if (other != axis) color = color * layout.size(other) + place.at(other);
  return color;
}

// The groups' names (as the traces and the flight recorder show them).
std::string group_name(const Place& p, const Layout& layout, Axis axis) {
  const std::string k = layout.tensor == 1 ? "" : "-tensor" + std::to_string(p.tensor);
  const std::string c = layout.context == 1 ? "" : "-context" + std::to_string(p.context);
  const std::string rs = "-r" + std::to_string(p.replica) + "s" + std::to_string(p.stage);
  switch (axis) {
    case Axis::kPipeline: return "pipeline" + std::to_string(p.replica) + c + k;
    case Axis::kData: return "stage" + std::to_string(p.stage) + "-replicas" + c + k;
    case Axis::kContext: return "context" + rs + k;
    case Axis::kTensor: return "tensor" + rs + c;
  }
  return "?";
}

}  // namespace

const char* axis_name(Axis axis) { return kNameOf[index(axis)]; }

int Layout::size(Axis axis) const { return this->*kSizeOf[index(axis)]; }

int Layout::world_size() const {
  int n = 1;
  for (const Axis axis : kAxes) n *= size(axis);
  return n;
}

std::string Layout::text() const {
  std::string text = std::to_string(pipeline) + (pipeline == 1 ? " stage x " : " stages x ") +
                     std::to_string(replicas) + (replicas == 1 ? " replica" : " replicas");
  if (context > 1) text += " x " + std::to_string(context) + " context ranks";
  if (tensor > 1) text += " x " + std::to_string(tensor) + " tensor ranks";
  return text;
}

int Place::at(Axis axis) const { return this->*kCoordinateOf[index(axis)]; }
int& Place::at(Axis axis) { return this->*kCoordinateOf[index(axis)]; }

Place place_of(int world_rank, const Layout& layout) {
  if (!valid(layout) || world_rank < 0 || world_rank >= layout.world_size())
    throw std::invalid_argument("rank " + std::to_string(world_rank) + " is not in a layout of " + layout.text());
  Place place;
  int rest = world_rank;
  for (auto axis = kAxes.rbegin(); axis != kAxes.rend(); ++axis) {  // innermost digit first
    place.at(*axis) = rest % layout.size(*axis);
    rest /= layout.size(*axis);
  }
  return place;
}

int rank_of(const Place& place, const Layout& layout) {
  int rank = 0;
  for (const Axis axis : kAxes) {
    if (place.at(axis) < 0 || place.at(axis) >= layout.size(axis))
      throw std::invalid_argument(std::string("rank_of: ") + axis_name(axis) + " coordinate " +
                                  std::to_string(place.at(axis)) + " is outside a layout of " + layout.text());
    rank = rank * layout.size(axis) + place.at(axis);
  }
  return rank;
}

std::vector<std::vector<int>> group_members(const Layout& layout, Axis axis) {
  std::vector<std::vector<int>> groups(static_cast<size_t>(layout.world_size() / layout.size(axis)));
  for (int rank = 0; rank < layout.world_size(); ++rank) {  // in rank order: each group's members by coordinate
    const Place place = place_of(rank, layout);
    groups[static_cast<size_t>(color_of(place, layout, axis))].push_back(rank);
  }
  return groups;
}

comm::Communicator& Groups::along(Axis axis) const { return *(this->*kGroupOf[index(axis)]); }

Groups make_groups(comm::Communicator& world, const Layout& layout) {
  if (!valid(layout) || world.size() != layout.world_size())
    throw std::invalid_argument(world.self() + ": a layout of " + layout.text() + " needs " +
                                std::to_string(layout.world_size()) + " ranks, the job has " +
                                std::to_string(world.size()) +
                                " (hint: --ranks P*R*C*T with threads, or as many processes under distlab-run)");
  Groups g;
  const Place p = g.place = place_of(world.rank(), layout);
  // Every rank splits in the same order (each split is a collective).
  for (const Axis axis : {Axis::kPipeline, Axis::kData, Axis::kTensor, Axis::kContext})
    g.*kGroupOf[index(axis)] = world.split(color_of(p, layout, axis), p.at(axis), group_name(p, layout, axis));
  if (layout.context > 1) {  // data x context: one group per (stage, tensor rank)
    const AveragingPlace a = averaging_place(p, layout);
    g.replicas_and_context =
        world.split(a.group, a.rank,
                    "stage" + std::to_string(p.stage) + "-replicas-and-context" +
                        (layout.tensor == 1 ? "" : "-tensor" + std::to_string(p.tensor)));
  }
  return g;
}

AveragingPlace averaging_place(const Place& place, const Layout& layout) {
  return {place.stage * layout.tensor + place.tensor, place.replica * layout.context + place.context};
}

std::vector<std::vector<int>> averaging_members(const Layout& layout) {
  std::vector<std::vector<int>> groups(static_cast<size_t>(layout.pipeline * layout.tensor),
                                       std::vector<int>(static_cast<size_t>(layout.replicas * layout.context)));
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    const AveragingPlace a = averaging_place(place_of(rank, layout), layout);
    groups[static_cast<size_t>(a.group)][static_cast<size_t>(a.rank)] = rank;
  }
  return groups;
}

ExpertPlace expert_place(int averaging_rank, int experts_over) {
  return {averaging_rank / experts_over, averaging_rank % experts_over};
}

std::vector<std::vector<int>> expert_members(const Layout& layout, int experts_over) {
  std::vector<std::vector<int>> blocks;
  for (const std::vector<int>& averaging : averaging_members(layout))
    for (size_t r = 0; r < averaging.size(); ++r) {
      const ExpertPlace e = expert_place(static_cast<int>(r), experts_over);
      if (e.copy == 0) blocks.emplace_back();
      blocks.back().push_back(averaging[r]);
    }
  return blocks;
}

std::vector<std::vector<int>> expert_copy_members(const Layout& layout, int experts_over) {
  std::vector<std::vector<int>> copies;
  for (const std::vector<int>& averaging : averaging_members(layout)) {
    const size_t first = copies.size();
    copies.resize(first + static_cast<size_t>(experts_over));
    for (size_t r = 0; r < averaging.size(); ++r)
      copies[first + static_cast<size_t>(expert_place(static_cast<int>(r), experts_over).copy)].push_back(averaging[r]);
  }
  return copies;
}

}  // namespace distlab::train
