#include "replay.hpp"

#include <sstream>

namespace distlab::collectives::testing {
namespace {

uint64_t bit(int rank) { return uint64_t{1} << rank; }

uint64_t all_ranks(int p) { return p == 64 ? ~uint64_t{0} : bit(p) - 1; }

// Which of p equal-as-possible chunks element i falls in, by counting.
int owner_of(int64_t i, int64_t count, int p) {
  int64_t end = 0;
  for (int c = 0; c < p; ++c) {
    end += count / p + (c < count % p ? 1 : 0);
    if (i < end) return c;
  }
  return p - 1;
}

}  // namespace

bool in_result(const Plan& plan, int rank, int64_t i) {
  switch (plan.collective) {
    case Collective::kReduce: return rank == plan.root;
    case Collective::kReduceScatter: return owner_of(i, plan.count, plan.world_size) == rank;
    default: return true;
  }
}

namespace {

Cell own(int64_t i, int rank) { return Cell{i, bit(rank), false}; }

std::string describe(const Cell& c) {
  std::ostringstream out;
  if (c.element == Cell::kUndefined) return "undefined";
  if (c.element == Cell::kCorrupt) return "corrupt";
  out << "element " << c.element << " from ranks {";
  bool first = true;
  for (int r = 0; r < 64; ++r)
    if (c.ranks & bit(r)) {
      out << (first ? "" : ",") << r;
      first = false;
    }
  out << "}" << (c.counted_twice ? " with a rank counted twice" : "");
  return out.str();
}

std::string where(const Plan& plan, size_t step, const Transfer& t) {
  std::ostringstream out;
  out << to_string(plan.collective) << "/" << to_string(plan.algorithm) << " p=" << plan.world_size
      << " count=" << plan.count << " root=" << plan.root << " step " << step << " transfer " << t.src << "->" << t.dst
      << " chunk " << t.chunk << "+" << t.chunks << " [" << t.range.offset << ", +" << t.range.count << ")";
  return out.str();
}

// The range a transfer must cover, from the conventions alone.
Range expected_range(const Plan& plan, const Transfer& t) {
  if (t.chunk == -1) return {0, plan.count};
  int64_t offset = 0, count = 0;
  for (int c = 0; c < t.chunk + t.chunks; ++c) {
    const int64_t size = plan.count / plan.parts + (c < plan.count % plan.parts ? 1 : 0);
    if (c < t.chunk)
      offset += size;
    else
      count += size;
  }
  return {offset, count};
}

}  // namespace

Buffers initial_buffers(const Plan& plan) {
  const int p = plan.world_size;
  Buffers buffers(p, std::vector<Cell>(plan.count));
  for (int r = 0; r < p; ++r)
    for (int64_t i = 0; i < plan.count; ++i) {
      switch (plan.collective) {
        case Collective::kBroadcast:
          if (r == plan.root) buffers[r][i] = own(i, r);
          break;
        case Collective::kAllGather:
          if (owner_of(i, plan.count, p) == r) buffers[r][i] = own(i, r);
          break;
        default: buffers[r][i] = own(i, r);
      }
    }
  return buffers;
}

Buffers expected_buffers(const Plan& plan) {
  const int p = plan.world_size;
  Buffers buffers(p, std::vector<Cell>(plan.count));
  for (int r = 0; r < p; ++r)
    for (int64_t i = 0; i < plan.count; ++i) {
      switch (plan.collective) {
        case Collective::kBroadcast: buffers[r][i] = own(i, plan.root); break;
        case Collective::kAllGather: buffers[r][i] = own(i, owner_of(i, plan.count, p)); break;
        default: buffers[r][i] = Cell{i, all_ranks(p), false};
      }
    }
  return buffers;
}

std::string replay(const Plan& plan, Buffers& buffers) {
  const int p = plan.world_size;
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const Buffers before = buffers;  // sends read the buffers as the step began
    std::vector<std::vector<bool>> copied(p, std::vector<bool>(plan.count, false));
    for (const Transfer& t : plan.steps[s].transfers) {
      if (t.src < 0 || t.src >= p || t.dst < 0 || t.dst >= p) return where(plan, s, t) + ": rank out of range";
      if (t.src == t.dst) return where(plan, s, t) + ": a rank sends to itself";
      const Range want = expected_range(plan, t);
      if (t.chunk < -1 || t.chunk + t.chunks > plan.parts || want.offset != t.range.offset ||
          want.count != t.range.count)
        return where(plan, s, t) + ": range does not match its chunk";
      if (t.range.count == 0) return where(plan, s, t) + ": empty transfer (should have been left out)";
      for (int64_t i = t.range.offset; i < t.range.offset + t.range.count; ++i) {
        const Cell& in = before[t.src][i];
        Cell& acc = buffers[t.dst][i];
        if (!t.reduce) {
          if (copied[t.dst][i]) return where(plan, s, t) + ": two copies into one element in one step";
          copied[t.dst][i] = true;
          acc = in;
        } else if (acc.element < 0 || in.element != acc.element) {
          acc = Cell{Cell::kCorrupt, 0, false};
        } else {
          acc.counted_twice = acc.counted_twice || in.counted_twice || (acc.ranks & in.ranks) != 0;
          acc.ranks |= in.ranks;
        }
      }
    }
  }
  return "";
}

std::string compare_results(const Plan& plan, const Buffers& got, const Buffers& expected) {
  for (int r = 0; r < plan.world_size; ++r) {
    for (int64_t i = 0; i < plan.count; ++i) {
      if (!in_result(plan, r, i) || got[r][i] == expected[r][i]) continue;
      std::ostringstream out;
      out << to_string(plan.collective) << "/" << to_string(plan.algorithm) << " p=" << plan.world_size
          << " count=" << plan.count << " root=" << plan.root << ": rank " << r << " element " << i << " holds "
          << describe(got[r][i]) << ", expected " << describe(expected[r][i]);
      return out.str();
    }
  }
  return "";
}

}  // namespace distlab::collectives::testing
