#include "expert_checks.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include "support/differences.hpp"

namespace distlab::experts::testing {
namespace {

at::Tensor seeded(at::IntArrayRef shape, uint64_t seed) {
  return at::randn(shape, at::detail::createCPUGenerator(seed));
}

}  // namespace

double largest_difference_from_naive(comm::Communicator& comm, const MoeOptions& options) {
  const int64_t E = options.experts;
  // The same router and experts on every rank; each rank its own tokens.
  const at::Tensor gate = seeded({E, kModel}, 1);
  const ExpertMlps whole(seeded({E, kModel, kHidden}, 2) * 0.5, seeded({E, kHidden}, 3) * 0.1,
                         seeded({E, kHidden, kModel}, 4) * 0.5, seeded({E, kModel}, 5) * 0.1);
  // The input is an activation: its gradient goes back through both exchanges.
  const at::Tensor x_in = seeded({kTokens, kModel}, 100 + static_cast<uint64_t>(comm.rank()));
  const at::Tensor x = x_in.clone().requires_grad_(true), x_ref = x_in.clone().requires_grad_(true);
  const at::Tensor G = seeded({kTokens, kModel}, 200 + static_cast<uint64_t>(comm.rank()));

  // Expert parallel: my slice of the experts.
  const int64_t m = experts_per_rank(E, comm.size());
  ExpertMlps mine(whole->slice(comm.rank() * m, m));
  const at::Tensor gate_ep = gate.clone().requires_grad_(true);
  const Routing routing_ep = route(at::linear(x, gate_ep), options.top_k, options.normalize);
  const at::Tensor out_ep = moe_parallel(comm, x, routing_ep, *mine, options, nullptr, /*tag=*/5);
  (out_ep * G).sum().backward();

  // Naive: every expert here, my tokens only; the experts' gradients summed over the world.
  ExpertMlps all(whole->slice(0, E));
  const at::Tensor gate_ref = gate.clone().requires_grad_(true);
  const Routing routing_ref = route(at::linear(x_ref, gate_ref), options.top_k, options.normalize);
  const at::Tensor out_ref = moe_local(x_ref, routing_ref, *all, options);
  (out_ref * G).sum().backward();

  test_support::Worst worst;
  worst.add(out_ep, out_ref);
  worst.add(gate_ep.grad(), gate_ref.grad());
  worst.add(x.grad(), x_ref.grad());
  const std::vector<at::Tensor> ep = mine->parameters(), ref = all->parameters();
  for (size_t i = 0; i < ep.size(); ++i) {
    at::Tensor summed = ref[i].grad().clone();
    comm.native_all_reduce(summed);
    worst.add(ep[i].grad(), summed.narrow(0, comm.rank() * m, m));
  }
  return worst.value;
}

}  // namespace distlab::experts::testing
