// Megatron's linears against the unsplit MLP they were cut from: an MLP
// Linear(8, 12) -> GELU -> Linear(12, 8) on (S=12, B=2, 8) inputs, split
// column- then row-parallel over t = 1, 2, 3, 4 thread ranks, with and
// without sequence parallelism. Each rank's output, input gradient and
// weight gradients are the unsplit module's (its slice of them) to float32
// rounding; the row bias's gradient, under sequence parallelism a partial
// sum over this rank's rows, adds up over the group to the unsplit one.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <mutex>
#include <stdexcept>
#include <string>

#include "collectives/collectives.hpp"
#include "comm/threads_backend.hpp"
#include "tensor_parallel/linear.hpp"
#include "tensor_parallel/naive.hpp"

namespace distlab::tensor_parallel {
namespace {

constexpr int64_t kSeq = 12, kBatch = 2, kHidden = 8, kFfn = 12;

struct Mlp {
  at::Tensor w1, b1, w2, b2;
};

Mlp unsplit_mlp() {
  at::Generator g = at::detail::createCPUGenerator(7);
  return {at::randn({kFfn, kHidden}, g) * 0.3, at::randn({kFfn}, g) * 0.1, at::randn({kHidden, kFfn}, g) * 0.3,
          at::randn({kHidden}, g) * 0.1};
}

// The unsplit module on one process: output and every gradient of
// sum(y * probe).
struct Reference {
  at::Tensor x, probe, y, x_grad, w1_grad, b1_grad, w2_grad, b2_grad;
};

Reference reference(const Mlp& m) {
  at::Generator g = at::detail::createCPUGenerator(11);
  Reference r;
  r.x = at::randn({kSeq, kBatch, kHidden}, g);
  r.probe = at::randn({kSeq, kBatch, kHidden}, g);
  at::Tensor x = r.x.clone().requires_grad_(true);
  at::Tensor w1 = m.w1.clone().requires_grad_(true), b1 = m.b1.clone().requires_grad_(true);
  at::Tensor w2 = m.w2.clone().requires_grad_(true), b2 = m.b2.clone().requires_grad_(true);
  r.y = at::linear(at::gelu(at::linear(x, w1, b1)), w2, b2);
  (r.y * r.probe).sum().backward();
  r.y = r.y.detach();
  r.x_grad = x.grad();
  r.w1_grad = w1.grad();
  r.b1_grad = b1.grad();
  r.w2_grad = w2.grad();
  r.b2_grad = b2.grad();
  return r;
}

double largest(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  return (a - b).abs().max().item<double>();
}

struct Case {
  int t;
  bool sequence_parallel;
};

class TensorParallelMlp : public ::testing::TestWithParam<Case> {};

TEST_P(TensorParallelMlp, OutputAndEveryGradientAreTheUnsplitModules) {
  const Case c = GetParam();
  const Mlp m = unsplit_mlp();
  const Reference ref = reference(m);
  std::mutex mutex;
  double worst = 0;
  comm::run_thread_ranks(c.t, [&](comm::Communicator& group) {
    const ParallelOptions options{c.sequence_parallel};
    ColumnParallelLinear column(group, m.w1, m.b1, options);
    RowParallelLinear row(group, m.w2, m.b2, options);
    // Sequence parallel: this rank holds its rows of the input and gets its rows of the output.
    auto mine = [&](const at::Tensor& whole) { return c.sequence_parallel ? my_sequence_rows(group, whole) : whole; };
    at::Tensor x = mine(ref.x).clone().requires_grad_(true);
    const at::Tensor y = row(at::gelu(column(x)));
    (y * mine(ref.probe)).sum().backward();

    const int64_t f = kFfn / c.t;
    at::Tensor b2_grad = row->bias.grad().clone();
    if (c.sequence_parallel) collectives::all_reduce(group, b2_grad);  // partial sums over the rows
    const double d = std::max({largest(y, mine(ref.y)), largest(x.grad(), mine(ref.x_grad)),
                               largest(column->weight.grad(), ref.w1_grad.narrow(0, group.rank() * f, f)),
                               largest(column->bias.grad(), ref.b1_grad.narrow(0, group.rank() * f, f)),
                               largest(row->weight.grad(), ref.w2_grad.narrow(1, group.rank() * f, f)),
                               largest(b2_grad, ref.b2_grad)});
    std::lock_guard<std::mutex> lock(mutex);
    worst = std::max(worst, d);
  });
  EXPECT_LT(worst, 2e-5) << "t=" << c.t << (c.sequence_parallel ? " with" : " without") << " sequence parallelism";
}

INSTANTIATE_TEST_SUITE_P(ThreadRanks, TensorParallelMlp,
                         ::testing::Values(Case{1, false}, Case{2, false}, Case{3, false}, Case{4, false},
                                           Case{1, true}, Case{2, true}, Case{3, true}, Case{4, true}),
                         [](const auto& info) {
                           return "t" + std::to_string(info.param.t) + (info.param.sequence_parallel ? "_sp" : "");
                         });

// The naive version (gather the whole weight, compute, keep my slice) gives
// what the real linears give, slice for slice.
TEST(NaiveTensorParallel, GatherEverythingGivesTheSameSlices) {
  const Mlp m = unsplit_mlp();
  const Reference ref = reference(m);
  for (int t : {2, 4}) {
    comm::run_thread_ranks(t, [&](comm::Communicator& group) {
      ColumnParallelLinear column(group, m.w1, m.b1);
      RowParallelLinear row(group, m.w2, m.b2);
      at::NoGradGuard no_grad;
      const at::Tensor hidden = column(ref.x);
      EXPECT_LT(largest(naive_column_parallel(group, ref.x, column->weight, column->bias), hidden), 1e-6);
      EXPECT_LT(largest(naive_row_parallel(group, at::gelu(hidden), row->weight, row->bias), row(at::gelu(hidden))),
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
    const at::Tensor gathered = gather_sequence(group, s);
    EXPECT_TRUE(at::allclose(gathered, at::tensor({0.f, 0.f, 1.f, 1.f, 2.f, 2.f}).reshape({6, 1})));
    (gathered * at::arange(6, at::kFloat).reshape({6, 1})).sum().backward();
    // Every rank's gradient of the 6 rows is 0..5; summed over 3 ranks, my 2 rows.
    const at::Tensor expected = at::arange(6, at::kFloat).reshape({6, 1}).narrow(0, 2 * group.rank(), 2) * 3;
    EXPECT_TRUE(at::allclose(s.grad(), expected)) << s.grad();
    const at::Tensor scattered = scatter_sequence(group, base);
    EXPECT_TRUE(at::allclose(scattered, at::arange(6, at::kFloat).reshape({6, 1}).narrow(0, 2 * group.rank(), 2) * 6));
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
  });
}

}  // namespace
}  // namespace distlab::tensor_parallel
