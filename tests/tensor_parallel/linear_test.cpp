// Tensor parallelism on thread ranks: every check of checks.hpp for tensor
// sizes 1-4, the naive version against the real linears, the conjugate
// pair by hand, and the refusals.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/collectives.hpp"
#include "checks.hpp"
#include "comm/threads_backend.hpp"
#include "tensor_parallel/attention.hpp"
#include "tensor_parallel/linear.hpp"
#include "tensor_parallel/naive.hpp"

namespace distlab::tensor_parallel {
namespace {

// Every check (checks.hpp) on t = 1, 2, 3 and 4 thread ranks: the
// parallel module's outputs and gradients are the unsplit module's. As many
// checks ran as accept t, and some did: a size that every check turned
// away would pass having compared nothing.
class OnThreadRanks : public ::testing::TestWithParam<int> {};

TEST_P(OnThreadRanks, EveryCheckEqualsTheUnsplitModule) {
  const int t = GetParam();
  const std::vector<testing::Check> checks = testing::all_checks();
  const auto accepting = std::count_if(checks.begin(), checks.end(), [&](const auto& c) { return c.accepts(t); });
  int ran = 0;
  for (const testing::Check& check : checks) {
    if (!check.accepts(t)) continue;
    std::mutex mutex;
    test_support::Worst worst;
    int ranks_done = 0;
    comm::run_thread_ranks(t, [&](comm::Communicator& group) {
      const double d = check.run(group);
      std::lock_guard<std::mutex> lock(mutex);
      worst.add(d);
      ++ranks_done;
    });
    EXPECT_EQ(ranks_done, t) << check.name;
    if (ranks_done == t) ++ran;
    EXPECT_LT(worst.value, check.tolerance) << check.name << " on " << t << " thread ranks";
    std::printf("  %-25s t=%d  largest difference from the unsplit module %.3g\n", check.name.c_str(), t,
                worst.value);
  }
  EXPECT_GT(ran, 0) << "no check accepts " << t << " thread ranks";
  EXPECT_EQ(ran, accepting) << "checks that accept " << t << " thread ranks and ran on all of them";
}

INSTANTIATE_TEST_SUITE_P(TensorSizes, OnThreadRanks, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "t" + std::to_string(info.param); });

// A small MLP for the tests below.
struct Mlp {
  at::Tensor w1, b1, w2, b2;
};

Mlp unsplit_mlp() {
  at::Generator g = at::detail::createCPUGenerator(7);
  return {at::randn({12, 8}, g) * 0.3, at::randn({12}, g) * 0.1, at::randn({8, 12}, g) * 0.3,
          at::randn({8}, g) * 0.1};
}

// The naive version (gather the whole weight, compute, keep my slice) gives
// what the real linears give, slice for slice.
TEST(NaiveTensorParallel, GatherEverythingGivesTheSameSlices) {
  const Mlp m = unsplit_mlp();
  const at::Tensor x = at::randn({12, 2, 8}, at::detail::createCPUGenerator(11));
  for (int t : {2, 4}) {
    comm::run_thread_ranks(t, [&](comm::Communicator& group) {
      ColumnParallelLinear column(group, m.w1, m.b1);
      RowParallelLinear row(group, m.w2, m.b2);
      at::NoGradGuard no_grad;
      const at::Tensor hidden = column(x);
      EXPECT_LT(testing::largest_difference(naive_column_parallel(group, x, column->weight, column->bias), hidden),
                1e-6);
      EXPECT_LT(testing::largest_difference(naive_row_parallel(group, at::gelu(hidden), row->weight, row->bias),
                                            row(at::gelu(hidden))),
                2e-6);
    });
  }
}

// What crosses the wire: without sequence parallelism one all-reduce
// forward (g) and one backward (f); the ring moves 2 (t-1)/t of the tensor
// per rank either way, the same with the reduce-scatter/all-gather pair.
TEST(TensorParallelRegions, ConjugatesAreEachOthersBackward) {
  comm::run_thread_ranks(3, [&](comm::Communicator& group) {
    const at::Tensor base = at::arange(6, at::kFloat).reshape({6, 1}) * (group.rank() + 1);
    // f: identity forward, the sum of the ranks' gradients backward.
    at::Tensor a = base.clone().requires_grad_(true);
    const at::Tensor fa = copy_to_region(group, a);
    EXPECT_TRUE(at::equal(fa, base));
    (fa * (group.rank() + 1)).sum().backward();
    EXPECT_TRUE(at::allclose(a.grad(), at::full({6, 1}, 6.0f)));  // 1 + 2 + 3
    // g: the sum forward, identity backward.
    at::Tensor b = base.clone().requires_grad_(true);
    const at::Tensor gb = reduce_from_region(group, b);
    EXPECT_TRUE(at::allclose(gb, at::arange(6, at::kFloat).reshape({6, 1}) * 6));
    gb.sum().backward();
    EXPECT_TRUE(at::allclose(b.grad(), at::ones({6, 1})));
    // Sequence parallel: gather my 2 rows into 6; scatter sums and keeps my 2.
    at::Tensor s = at::full({2, 1}, float(group.rank())).requires_grad_(true);
    const at::Tensor gathered = gather_from_sequence_region(group, s);
    EXPECT_TRUE(at::allclose(gathered, at::tensor({0.f, 0.f, 1.f, 1.f, 2.f, 2.f}).reshape({6, 1})));
    (gathered * at::arange(6, at::kFloat).reshape({6, 1})).sum().backward();
    // Every rank's gradient of the 6 rows is 0..5; summed over 3 ranks, my 2 rows.
    const at::Tensor expected = at::arange(6, at::kFloat).reshape({6, 1}).narrow(0, 2 * group.rank(), 2) * 3;
    EXPECT_TRUE(at::allclose(s.grad(), expected)) << s.grad();
    const at::Tensor scattered = reduce_scatter_to_sequence_region(group, base);
    EXPECT_TRUE(at::allclose(scattered, at::arange(6, at::kFloat).reshape({6, 1}).narrow(0, 2 * group.rank(), 2) * 6));
    // scatter (Megatron's word for a split): my 2 rows forward, no sum; backward
    // all-gathers: every rank's gradient of its rows lands in the whole's gradient.
    at::Tensor w = base.clone().requires_grad_(true);
    const at::Tensor mine = scatter_to_sequence_region(group, w);
    EXPECT_TRUE(at::equal(mine, base.narrow(0, 2 * group.rank(), 2)));
    (mine * (group.rank() + 1)).sum().backward();
    EXPECT_TRUE(at::equal(w.grad(), at::tensor({1.f, 1.f, 2.f, 2.f, 3.f, 3.f}).reshape({6, 1}))) << w.grad();
  });
}

TEST(TensorParallelRefusals, SizesThatDoNotSplitAreNamedWithSizesThatWould) {
  comm::run_thread_ranks(4, [&](comm::Communicator& group) {
    try {
      ColumnParallelLinear column(group, at::zeros({10, 8}), at::zeros({10}));
      ADD_FAILURE() << "10 features on 4 ranks accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()),
                "ColumnParallelLinear: 10 output features do not split among 4 tensor ranks; "
                "tensor sizes that would: 1, 2, 5, 10");
    }
    try {
      RowParallelLinear row(group, at::zeros({8, 6}), at::Tensor());
      ADD_FAILURE() << "6 features on 4 ranks accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("RowParallelLinear: 6 input features do not split among 4"),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW(my_sequence_rows(group, at::zeros({6, 2})), std::invalid_argument);
    try {  // 6 heads among 4 ranks
      ParallelAttention attention(group, torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(12, 6)));
      ADD_FAILURE() << "6 heads on 4 ranks accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()),
                "ParallelAttention: 6 heads do not split among 4 tensor ranks; tensor sizes that would: 1, 2, 3, 6");
    }
  });
}

}  // namespace
}  // namespace distlab::tensor_parallel
