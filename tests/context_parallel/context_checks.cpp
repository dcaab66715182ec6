#include "context_checks.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <limits>

#include "context_parallel/gathered_attention.hpp"
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

const char* to_string(Method method) {
  switch (method) {
    case Method::kRing: return "ring";
    case Method::kAllGather: return "all_gather";
    case Method::kNaive: return "naive";
  }
  return "?";
}

double largest_difference_from_whole(comm::Communicator& comm, Layout layout, bool causal, Method method) {
  const at::Tensor q = seeded({1, 2, kLength, 8}, 1), k = seeded({1, 2, kLength, 8}, 2), v = seeded({1, 2, kLength, 8}, 3);
  const at::Tensor scores = whole_scores(q, k, kScale, causal);
  const at::Tensor whole_out = at::matmul(at::softmax(scores, -1), v), whole_lse = at::logsumexp(scores, -1);
  const at::Tensor mine = positions_of(layout, kLength, comm.size(), comm.rank());
  const at::Tensor qm = q.index_select(-2, mine), km = k.index_select(-2, mine), vm = v.index_select(-2, mine);
  BlockResult got;
  switch (method) {
    case Method::kRing: got = ring_attention(comm, qm, km, vm, kScale, mine, causal, /*tag=*/7); break;
    case Method::kAllGather: got = all_gather_attention(comm, qm, km, vm, kScale, mine, causal, /*tag=*/7); break;
    case Method::kNaive: got = naive_attention(comm, qm, km, vm, kScale, mine, causal, /*tag=*/7); break;
  }
  return std::max(test_support::largest_difference(got.out, whole_out.index_select(-2, mine)),
                  test_support::largest_difference(got.lse, whole_lse.index_select(-1, mine)));
}

}  // namespace distlab::context_parallel::testing
