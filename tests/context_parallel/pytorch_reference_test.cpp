// Context parallelism against PyTorch's own attention in Python: the whole
// Q, K, V (B=2, H=4, S=16, D=8) handed to tests/context_parallel/
// pytorch_attention.py, which runs PyTorch's scaled dot-product attention
// (the kernel nn.MultiheadAttention calls) causal and not; the ring
// (contiguous and zigzag), all-gather and Ulysses on 2 and 4 thread ranks
// give each rank's rows of its output, and of the log-sum-exp of its scores.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "comm/threads_backend.hpp"
#include "context_checks.hpp"
#include "context_parallel/gathered_attention.hpp"
#include "context_parallel/ring_attention.hpp"
#include "context_parallel/ulysses.hpp"
#include "support/differences.hpp"
#include "support/python_torch.hpp"
#include "support/required_tool.hpp"

namespace distlab::context_parallel {
namespace {

namespace fs = std::filesystem;

TEST(PyTorchReference, EveryMethodEqualsPyTorchsAttention) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(test_support::have_python_torch(), test_support::no_python_torch());
  const at::Tensor q = testing::seeded({2, 4, 16, 8}, 51), k = testing::seeded({2, 4, 16, 8}, 52);
  const at::Tensor v = testing::seeded({2, 4, 16, 8}, 53);
  const fs::path dir = fs::temp_directory_path() / ("distlab_cp_reference_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  test_support::save_pickle(dir / "q.pt", q);
  test_support::save_pickle(dir / "k.pt", k);
  test_support::save_pickle(dir / "v.pt", v);
  const fs::path script = fs::path(DISTLAB_SOURCE_DIR) / "tests" / "context_parallel" / "pytorch_attention.py";
  const auto run = test_support::run_python(script.string() + " " + dir.string(), dir / "log");
  ASSERT_EQ(run.status, 0) << "the PyTorch reference failed:\n" << run.log;
  const auto reference = test_support::load_pickle(dir / "reference.pt").toGenericDict();
  fs::remove_all(dir);

  const double scale = 1.0 / std::sqrt(8.0);
  int compared = 0;
  for (int C : {2, 4})
    for (Layout layout : {Layout::kContiguous, Layout::kZigzag})
      for (bool causal : {false, true}) {
        const at::Tensor want_out = reference.at(causal ? "causal" : "full").toTensor();
        const at::Tensor want_lse = reference.at(causal ? "lse_causal" : "lse_full").toTensor();
        comm::run_thread_ranks(C, [&](comm::Communicator& comm) {
          const at::Tensor mine = positions_of(layout, 16, C, comm.rank());
          const at::Tensor qm = q.index_select(-2, mine), km = k.index_select(-2, mine), vm = v.index_select(-2, mine);
          const BlockResult results[] = {ring_attention(comm, qm, km, vm, scale, mine, causal, 1),
                                         all_gather_attention(comm, qm, km, vm, scale, mine, causal, 1),
                                         ulysses_attention(comm, qm, km, vm, scale, mine, causal, 1)};
          for (const BlockResult& got : results) {
            EXPECT_LE(test_support::largest_difference(got.out, want_out.index_select(-2, mine)), 2e-6)
                << comm.self() << " C=" << C << " " << to_string(layout) << (causal ? " causal" : " full");
            EXPECT_LE(test_support::largest_difference(got.lse, want_lse.index_select(-1, mine)), 2e-6)
                << comm.self() << " C=" << C << " " << to_string(layout) << (causal ? " causal" : " full");
          }
        });
        ++compared;
      }
  EXPECT_EQ(compared, 8);
}

}  // namespace
}  // namespace distlab::context_parallel
