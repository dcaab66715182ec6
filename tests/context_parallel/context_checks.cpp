#include "context_checks.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <limits>

#include "context_parallel/gathered_attention.hpp"
#include "context_parallel/ulysses.hpp"
#include "support/differences.hpp"

namespace distlab::context_parallel::testing {
namespace {

constexpr double kScale = 0.35;

}  // namespace

at::Tensor seeded(at::IntArrayRef shape, uint64_t seed) { return at::randn(shape, at::detail::createCPUGenerator(seed)); }

at::Tensor whole_scores(const at::Tensor& q, const at::Tensor& k, double scale, bool causal) {
  const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  if (!causal) return scores;
  const at::Tensor all = at::arange(q.size(-2), at::kLong);
  return scores.masked_fill(all.unsqueeze(0) > all.unsqueeze(1), -std::numeric_limits<float>::infinity());
}

double largest_difference_from_whole(comm::Communicator& comm, Layout layout, bool causal, Method method) {
  const at::Tensor q = seeded({1, kHeads, kLength, 8}, 1), k = seeded({1, kHeads, kLength, 8}, 2);
  const at::Tensor v = seeded({1, kHeads, kLength, 8}, 3);
  const at::Tensor scores = whole_scores(q, k, kScale, causal);
  const at::Tensor whole_out = at::matmul(at::softmax(scores, -1), v), whole_lse = at::logsumexp(scores, -1);
  const at::Tensor mine = positions_of(layout, kLength, comm.size(), comm.rank());
  const at::Tensor qm = q.index_select(-2, mine), km = k.index_select(-2, mine), vm = v.index_select(-2, mine);
  BlockResult got;
  switch (method) {
    case Method::kRing: got = ring_attention(comm, qm, km, vm, kScale, mine, causal, /*tag=*/7); break;
    case Method::kAllGather: got = all_gather_attention(comm, qm, km, vm, kScale, mine, causal, /*tag=*/7); break;
    case Method::kNaive: got = naive_attention(comm, qm, km, vm, kScale, mine, causal, /*tag=*/7); break;
    case Method::kUlysses: got = ulysses_attention(comm, qm, km, vm, kScale, mine, causal, /*tag=*/7); break;
  }
  return std::max(test_support::largest_difference(got.out, whole_out.index_select(-2, mine)),
                  test_support::largest_difference(got.lse, whole_lse.index_select(-1, mine)));
}

double largest_gradient_difference(comm::Communicator& comm, Layout layout, bool causal, Method method) {
  const at::Tensor q = seeded({1, kHeads, kLength, 8}, 21).requires_grad_(true);
  const at::Tensor k = seeded({1, kHeads, kLength, 8}, 22).requires_grad_(true);
  const at::Tensor v = seeded({1, kHeads, kLength, 8}, 23).requires_grad_(true);
  const at::Tensor G = seeded({1, kHeads, kLength, 8}, 24);
  (at::matmul(at::softmax(whole_scores(q, k, kScale, causal), -1), v) * G).sum().backward();
  const at::Tensor mine = positions_of(layout, kLength, comm.size(), comm.rank());
  at::Tensor qm = q.detach().index_select(-2, mine), km = k.detach().index_select(-2, mine);
  at::Tensor vm = v.detach().index_select(-2, mine);
  const at::Tensor gm = G.index_select(-2, mine);
  qm.requires_grad_(true), km.requires_grad_(true), vm.requires_grad_(true);
  (context_attention(comm, method, qm, km, vm, kScale, mine, causal, /*tag=*/3) * gm).sum().backward();
  const at::Tensor dq = qm.grad(), dk = km.grad(), dv = vm.grad();
  return std::max({test_support::largest_difference(dq, q.grad().index_select(-2, mine)),
                   test_support::largest_difference(dk, k.grad().index_select(-2, mine)),
                   test_support::largest_difference(dv, v.grad().index_select(-2, mine))});
}

}  // namespace distlab::context_parallel::testing
