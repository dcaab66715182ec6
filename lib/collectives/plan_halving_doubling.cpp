// Recursive halving-doubling all-reduce (Rabenseifner's algorithm).
//
// For p a power of two the buffer is cut into p chunks. Reduce-scatter by
// recursive halving: in each step a rank and its partner r ^ d (d = p/2,
// p/4, ..., 1) split the block they are both responsible for; each keeps one
// half, sends the other, and adds the half it receives. After log2 p steps
// rank r holds chunk r complete. All-gather by recursive doubling walks back
// up (d = 1, 2, ..., p/2), each exchange doubling the block a rank holds.
// 2 log2 p steps; like the ring, 2 (p - 1) / p of the buffer sent per rank.
//
// Any other p: q = the largest power of two below p does the above, and the
// p - q extra ranks fold in around it. p = 6, q = 4:
//
//   fold:    4->0, 5->1 whole buffer, added      (ranks 4, 5 now wait)
//   halving and doubling among ranks 0..3, chunks of q
//   unfold:  0->4, 1->5 whole buffer, copied
#include <vector>

#include "collectives/plan_builders.hpp"

namespace distlab::collectives::detail {

int power_of_two_floor(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

void add_halving_doubling_all_reduce(Plan& plan) {
  const int p = plan.world_size;
  const int q = plan.parts;

  Step fold{"fold", {}};
  for (int extra = q; extra < p; ++extra) fold.transfers.push_back(whole_buffer(plan, extra, extra - q, true));
  add_step(plan, std::move(fold));

  // first[r]: the first chunk of the block rank r is responsible for. The
  // block has 2d chunks before the step of distance d and d after it.
  std::vector<int> first(q, 0);
  for (int d = q / 2; d >= 1; d /= 2) {
    Step step{"reduce-scatter", {}};
    for (int r = 0; r < q; ++r) {
      const bool keeps_lower = (r & d) == 0;
      step.transfers.push_back(chunk_block(plan, r, r ^ d, keeps_lower ? first[r] + d : first[r], d, true));
    }
    for (int r = 0; r < q; ++r)
      if ((r & d) != 0) first[r] += d;
    add_step(plan, std::move(step));
  }

  // Rank r now holds chunk r. Before the step of distance d it holds the d
  // chunks starting at r rounded down to a multiple of d.
  for (int d = 1; d < q; d *= 2) {
    Step step{"all-gather", {}};
    for (int r = 0; r < q; ++r) step.transfers.push_back(chunk_block(plan, r, r ^ d, r & ~(d - 1), d, false));
    add_step(plan, std::move(step));
  }

  Step unfold{"unfold", {}};
  for (int extra = q; extra < p; ++extra) unfold.transfers.push_back(whole_buffer(plan, extra - q, extra, false));
  add_step(plan, std::move(unfold));
}

}  // namespace distlab::collectives::detail
