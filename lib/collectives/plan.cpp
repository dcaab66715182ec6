// make_plan() and the small facts every user of a Plan needs: chunk
// boundaries, bytes per rank, names.
#include "collectives/plan.hpp"

#include <algorithm>
#include <stdexcept>

#include "collectives/plan_builders.hpp"

namespace distlab::collectives {
namespace {

constexpr int kMaxWorldSize = 1024;

constexpr Collective kCollectives[] = {Collective::kBroadcast, Collective::kReduce, Collective::kAllReduce,
                                       Collective::kReduceScatter, Collective::kAllGather, Collective::kAllToAll};
constexpr Algorithm kAlgorithms[] = {Algorithm::kSequential,      Algorithm::kTree,
                                     Algorithm::kReduceBroadcast, Algorithm::kRing,
                                     Algorithm::kHalvingDoubling, Algorithm::kPairwise,
                                     Algorithm::kNative};

std::string normalized(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

template <typename Enum, size_t N>
Enum parse_name(const std::string& name, const Enum (&values)[N], const char* what) {
  const std::string wanted = normalized(name);
  std::string valid;
  for (Enum value : values) {
    if (wanted == to_string(value)) return value;
    valid += (valid.empty() ? "" : ", ") + std::string(to_string(value));
  }
  throw std::invalid_argument("unknown " + std::string(what) + " '" + name + "' (expected one of: " + valid + ")");
}

void check_arguments(Collective collective, Algorithm algorithm, int world_size, int64_t count, int root,
                     int elem_bytes) {
  if (world_size < 1 || world_size > kMaxWorldSize)
    throw std::invalid_argument("world size " + std::to_string(world_size) + " is outside [1, " +
                                std::to_string(kMaxWorldSize) + "]");
  if (count < 0) throw std::invalid_argument("element count " + std::to_string(count) + " is negative");
  if (elem_bytes < 1) throw std::invalid_argument("element size " + std::to_string(elem_bytes) + " bytes is < 1");
  if (root < 0 || root >= world_size)
    throw std::invalid_argument("root " + std::to_string(root) + " is outside [0, " + std::to_string(world_size) + ")");
  const auto valid = algorithms_for(collective);
  if (std::find(valid.begin(), valid.end(), algorithm) == valid.end()) {
    std::string names;
    for (Algorithm a : valid) names += (names.empty() ? "" : ", ") + std::string(to_string(a));
    throw std::invalid_argument(std::string(to_string(collective)) + " has no plan for algorithm '" +
                                to_string(algorithm) + "' (plans exist for: " + names + ")");
  }
}

}  // namespace

Range chunk_range(int64_t count, int parts, int c) {
  const int64_t base = count / parts, extra = count % parts;
  return {c * base + std::min<int64_t>(c, extra), base + (c < extra ? 1 : 0)};
}

int64_t Plan::bytes_sent_by(int rank) const {
  int64_t elements = 0;
  for (const Step& step : steps)
    for (const Transfer& t : step.transfers)
      if (t.src == rank) elements += t.range.count;
  return elements * elem_bytes;
}

int64_t Plan::bytes_received_by(int rank) const {
  int64_t elements = 0;
  for (const Step& step : steps)
    for (const Transfer& t : step.transfers)
      if (t.dst == rank) elements += t.range.count;
  return elements * elem_bytes;
}

Range result_range(const Plan& plan, int rank) {
  switch (plan.collective) {
    case Collective::kReduce: return rank == plan.root ? Range{0, plan.count} : Range{0, 0};
    case Collective::kReduceScatter: return chunk_range(plan.count, plan.world_size, rank);
    case Collective::kAllToAll: return {0, plan.output_count(rank)};
    default: return {0, plan.count};
  }
}

Plan make_plan(Collective collective, Algorithm algorithm, int world_size, int64_t count, int root, int elem_bytes) {
  check_arguments(collective, algorithm, world_size, count, root, elem_bytes);
  Plan plan;
  plan.collective = collective;
  plan.algorithm = algorithm;
  plan.world_size = world_size;
  plan.root = root;
  plan.count = count;
  plan.elem_bytes = elem_bytes;
  plan.parts = 1;
  switch (collective) {
    case Collective::kBroadcast:
      if (algorithm == Algorithm::kSequential)
        detail::add_sequential_broadcast(plan, root);
      else
        detail::add_tree_broadcast(plan, root);
      break;
    case Collective::kReduce:
      if (algorithm == Algorithm::kSequential)
        detail::add_sequential_reduce(plan, root);
      else
        detail::add_tree_reduce(plan, root);
      break;
    case Collective::kAllReduce:
      if (algorithm == Algorithm::kReduceBroadcast) {
        detail::add_tree_reduce(plan, 0);
        detail::add_tree_broadcast(plan, 0);
      } else if (algorithm == Algorithm::kRing) {
        plan.parts = world_size;
        detail::add_ring_reduce_scatter(plan);
        detail::add_ring_all_gather(plan);
      } else {
        plan.parts = detail::power_of_two_floor(world_size);
        detail::add_halving_doubling_all_reduce(plan);
      }
      break;
    case Collective::kReduceScatter:
      plan.parts = world_size;
      detail::add_ring_reduce_scatter(plan);
      break;
    case Collective::kAllGather:
      plan.parts = world_size;
      detail::add_ring_all_gather(plan);
      break;
    case Collective::kAllToAll:
      if (count % world_size != 0)
        throw std::invalid_argument("all_to_all splits the buffer into " + std::to_string(world_size) +
                                    " equal blocks: " + std::to_string(count) + " elements do not divide (" +
                                    "make_all_to_all_plan takes blocks of any size)");
      plan.parts = world_size;
      plan.counts.assign(static_cast<size_t>(world_size) * world_size, count / world_size);
      detail::add_pairwise_exchange(plan);
      break;
  }
  return plan;
}

std::vector<Algorithm> algorithms_for(Collective collective) {
  switch (collective) {
    case Collective::kBroadcast:
    case Collective::kReduce: return {Algorithm::kSequential, Algorithm::kTree};
    case Collective::kAllReduce: return {Algorithm::kReduceBroadcast, Algorithm::kRing, Algorithm::kHalvingDoubling};
    case Collective::kReduceScatter:
    case Collective::kAllGather: return {Algorithm::kRing};
    case Collective::kAllToAll: return {Algorithm::kPairwise};
  }
  return {};
}

const char* to_string(Collective collective) {
  switch (collective) {
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllGather: return "all_gather";
    case Collective::kAllToAll: return "all_to_all";
  }
  return "?";
}

const char* to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kSequential: return "sequential";
    case Algorithm::kTree: return "tree";
    case Algorithm::kReduceBroadcast: return "reduce_broadcast";
    case Algorithm::kRing: return "ring";
    case Algorithm::kHalvingDoubling: return "halving_doubling";
    case Algorithm::kPairwise: return "pairwise";
    case Algorithm::kNative: return "native";
  }
  return "?";
}

Collective parse_collective(const std::string& name) { return parse_name(name, kCollectives, "collective"); }
Algorithm parse_algorithm(const std::string& name) { return parse_name(name, kAlgorithms, "algorithm"); }

namespace detail {

Transfer whole_buffer(const Plan& plan, int src, int dst, bool reduce) {
  Transfer t;
  t.src = src;
  t.dst = dst;
  t.chunk = -1;
  t.chunks = 1;
  t.range = {0, plan.count};
  t.reduce = reduce;
  return t;
}

Transfer chunk_block(const Plan& plan, int src, int dst, int first, int chunks, bool reduce) {
  const Range begin = chunk_range(plan.count, plan.parts, first);
  const Range last = chunk_range(plan.count, plan.parts, first + chunks - 1);
  Transfer t;
  t.src = src;
  t.dst = dst;
  t.chunk = first;
  t.chunks = chunks;
  t.range = {begin.offset, last.offset + last.count - begin.offset};
  t.reduce = reduce;
  return t;
}

void add_step(Plan& plan, Step step) {
  auto& transfers = step.transfers;
  transfers.erase(
      std::remove_if(transfers.begin(), transfers.end(), [](const Transfer& t) { return t.range.count == 0; }),
      transfers.end());
  if (!transfers.empty()) plan.steps.push_back(std::move(step));
}

}  // namespace detail
}  // namespace distlab::collectives
