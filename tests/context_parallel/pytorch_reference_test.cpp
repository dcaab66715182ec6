// Context parallelism against PyTorch's own attention in Python: the whole
// Q, K, V (B=2, H=4, S=16, D=8) and a gradient G of the output handed to
// tests/context_parallel/pytorch_attention.py, which runs PyTorch's scaled
// dot-product attention (the kernel nn.MultiheadAttention calls) causal and
// not, and PyTorch's autograd of sum(out * G) through a plain attention
// written out there. Every method (the ring, all-gather, the naive gather
// of everything, Ulysses) on 2 and 4 thread ranks, contiguous and zigzag,
// gives each rank's rows of its output and of the log-sum-exp of its
// scores, and, through context_attention (the ring's own backward, autograd
// through the gathers and Ulysses' exchanges), the gradients of its own
// tokens' q, k and v.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include "comm/threads_backend.hpp"
#include "context_checks.hpp"
#include "context_parallel/context_attention.hpp"
#include "context_parallel/gathered_attention.hpp"
#include "context_parallel/ring_attention.hpp"
#include "context_parallel/ulysses.hpp"
#include "support/differences.hpp"
#include "support/python_torch.hpp"
#include "support/required_tool.hpp"

namespace distlab::context_parallel {
namespace {

namespace fs = std::filesystem;

using test_support::largest_difference;

// PyTorch's results for the inputs below, by name (pytorch_attention.py's keys).
std::map<std::string, at::Tensor> pytorch_reference(const std::map<std::string, at::Tensor>& inputs) {
  const fs::path dir = fs::temp_directory_path() / ("distlab_cp_reference_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& [name, tensor] : inputs) test_support::save_pickle(dir / (name + ".pt"), tensor);
  const fs::path script = fs::path(DISTLAB_SOURCE_DIR) / "tests" / "context_parallel" / "pytorch_attention.py";
  const auto run = test_support::run_python(script.string() + " " + dir.string(), dir / "log");
  std::map<std::string, at::Tensor> out;
  if (run.status != 0) {
    ADD_FAILURE() << "the PyTorch reference failed:\n" << run.log;
  } else {
    for (const auto& item : test_support::load_pickle(dir / "reference.pt").toGenericDict())
      out[item.key().toStringRef()] = item.value().toTensor();
  }
  fs::remove_all(dir);
  return out;
}

TEST(PyTorchReference, EveryMethodsOutputAndGradientsEqualPyTorchs) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(test_support::have_python_torch(), test_support::no_python_torch());
  const at::Tensor q = testing::seeded({2, 4, 16, 8}, 51), k = testing::seeded({2, 4, 16, 8}, 52);
  const at::Tensor v = testing::seeded({2, 4, 16, 8}, 53), G = testing::seeded({2, 4, 16, 8}, 54);
  const auto reference = pytorch_reference({{"q", q}, {"k", k}, {"v", v}, {"dout", G}});
  ASSERT_EQ(reference.size(), 10u) << "out, lse, dq, dk and dv, causal and full";

  const double scale = 1.0 / std::sqrt(8.0);
  for (int C : {2, 4})
    for (Layout layout : {Layout::kContiguous, Layout::kZigzag})
      for (bool causal : {false, true}) {
        const std::string kind = causal ? "causal" : "full";
        const at::Tensor want_out = reference.at(kind), want_lse = reference.at("lse_" + kind);
        const at::Tensor want_dq = reference.at("dq_" + kind), want_dk = reference.at("dk_" + kind);
        const at::Tensor want_dv = reference.at("dv_" + kind);
        comm::run_thread_ranks(C, [&](comm::Communicator& comm) {
          const std::string where = comm.self() + " C=" + std::to_string(C) + " " + to_string(layout) + " " + kind;
          const at::Tensor mine = positions_of(layout, 16, C, comm.rank());
          const at::Tensor qm = q.index_select(-2, mine), km = k.index_select(-2, mine), vm = v.index_select(-2, mine);
          // The forward of each method: my rows of the output and of the log-sum-exp.
          const std::pair<Method, BlockResult> results[] = {
              {Method::kRing, ring_attention(comm, qm, km, vm, scale, mine, causal, 1)},
              {Method::kAllGather, all_gather_attention(comm, qm, km, vm, scale, mine, causal, 1)},
              {Method::kNaive, naive_attention(comm, qm, km, vm, scale, mine, causal, 1)},
              {Method::kUlysses, ulysses_attention(comm, qm, km, vm, scale, mine, causal, 1)}};
          for (const auto& [method, got] : results) {
            EXPECT_LE(largest_difference(got.out, want_out.index_select(-2, mine)), testing::kTolerance)
                << where << " " << to_string(method) << ": output";
            EXPECT_LE(largest_difference(got.lse, want_lse.index_select(-1, mine)), testing::kTolerance)
                << where << " " << to_string(method) << ": log-sum-exp";
          }
          // The backward of each method: sum(out * G) differentiated to my tokens' q, k and v.
          for (Method method : all_methods()) {
            const at::Tensor qg = qm.clone().requires_grad_(true), kg = km.clone().requires_grad_(true);
            const at::Tensor vg = vm.clone().requires_grad_(true);
            const at::Tensor out = context_attention(comm, method, qg, kg, vg, scale, mine, causal, 1);
            EXPECT_LE(largest_difference(out, want_out.index_select(-2, mine)), testing::kTolerance)
                << where << " " << to_string(method) << ": context_attention's output";
            (out * G.index_select(-2, mine)).sum().backward();
            EXPECT_LE(largest_difference(qg.grad(), want_dq.index_select(-2, mine)), testing::kGradientTolerance)
                << where << " " << to_string(method) << ": dq";
            EXPECT_LE(largest_difference(kg.grad(), want_dk.index_select(-2, mine)), testing::kGradientTolerance)
                << where << " " << to_string(method) << ": dk";
            EXPECT_LE(largest_difference(vg.grad(), want_dv.index_select(-2, mine)), testing::kGradientTolerance)
                << where << " " << to_string(method) << ": dv";
          }
        });
      }
}

}  // namespace
}  // namespace distlab::context_parallel
