// Megatron's linears against the unsplit MLP they were cut from: an MLP
// Linear(8, 12) -> GELU -> Linear(12, 8) on (S=12, B=2, 8) inputs, split
// column- then row-parallel over the group, with and without sequence
// parallelism. Each rank's output, input gradient and weight gradients are
// the unsplit module's (its slice of them) to float32 rounding; the row
// bias's gradient, under sequence parallelism a partial sum over this
// rank's rows, adds up over the group to the unsplit one.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "checks.hpp"
#include "collectives/collectives.hpp"
#include "tensor_parallel/linear.hpp"

namespace distlab::tensor_parallel::testing {
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

// The unsplit module on one process: output and every gradient of sum(y * probe).
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

double check_mlp(comm::Communicator& group, bool sequence_parallel) {
  const Mlp m = unsplit_mlp();
  const Reference ref = reference(m);
  const ParallelOptions options{sequence_parallel};
  ColumnParallelLinear column(group, m.w1, m.b1, options);
  RowParallelLinear row(group, m.w2, m.b2, options);
  // Sequence parallel: this rank holds its rows of the input and gets its rows of the output.
  auto mine = [&](const at::Tensor& whole) { return sequence_parallel ? my_sequence_rows(group, whole) : whole; };
  at::Tensor x = mine(ref.x).clone().requires_grad_(true);
  const at::Tensor y = row(at::gelu(column(x)));
  (y * mine(ref.probe)).sum().backward();

  const int64_t f = kFfn / group.size();
  at::Tensor b2_grad = row->bias.grad().clone();
  if (sequence_parallel) collectives::all_reduce(group, b2_grad);  // partial sums over the rows
  return worst_of({largest_difference(y, mine(ref.y)), largest_difference(x.grad(), mine(ref.x_grad)),
                   largest_difference(column->weight.grad(), ref.w1_grad.narrow(0, group.rank() * f, f)),
                   largest_difference(column->bias.grad(), ref.b1_grad.narrow(0, group.rank() * f, f)),
                   largest_difference(row->weight.grad(), ref.w2_grad.narrow(1, group.rank() * f, f)),
                   largest_difference(b2_grad, ref.b2_grad)});
}

}  // namespace

std::vector<Check> mlp_checks() {
  auto splits = [](int t) { return kFfn % t == 0 && kSeq % t == 0; };
  return {{"mlp", 2e-5, [](comm::Communicator& g) { return check_mlp(g, false); }, splits},
          {"mlp_sp", 2e-5, [](comm::Communicator& g) { return check_mlp(g, true); }, splits}};
}

std::vector<Check> all_checks() {
  std::vector<Check> checks;
  for (auto part : {mlp_checks, layer_checks, vocab_checks}) {
    auto more = part();
    checks.insert(checks.end(), more.begin(), more.end());
  }
  return checks;
}

}  // namespace distlab::tensor_parallel::testing
