// The independent reference: PyTorch's own DistributedSampler and
// DistributedDataParallel (Python, python3-torch, gloo, CPU) against
// DistLab's, from the same initial weights on the same data. Skipped where
// python3 with torch is missing (failed under CI=true); a reference script
// that fails fails the test.
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>

#include "comm/threads_backend.hpp"
#include "compat/torch.hpp"
#include "ddp/distributed_data_parallel.hpp"
#include "ddp/distributed_sampler.hpp"
#include "ddp_test_util.hpp"
#include "support/python_torch.hpp"
#include "support/required_tool.hpp"

namespace distlab::ddp {
namespace {

using namespace testing;

const std::string kScript = std::string(DISTLAB_SOURCE_DIR) + "/tests/ddp/pytorch_reference.py";

// Runs a shell command, feeding it `input`; returns its stdout. Fails the
// test on a non-zero exit.
std::string run(const std::string& command, const std::string& input = "") {
  // One file per process: ctest runs this suite's tests side by side.
  const std::string in_path = ::testing::TempDir() + "/ddp_ref_input." + std::to_string(getpid()) + ".txt";
  std::ofstream(in_path) << input;
  FILE* pipe = popen((command + " < " + in_path).c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << "the PyTorch reference failed: " << command << "\n" << out;
  return out;
}

TEST(PyTorchReference, DistributedSamplerGivesPyTorchsIndices) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(test_support::have_python_torch(), test_support::no_python_torch());
  struct Case {
    int64_t n;
    int replicas, rank;
    bool shuffle;
    uint64_t seed;
    bool drop_last;
    int64_t epoch;
  };
  std::vector<Case> cases;
  for (int64_t n : {0, 1, 7, 10, 33, 1000})
    for (int replicas : {1, 3, 4})
      for (bool shuffle : {false, true})
        for (bool drop_last : {false, true})
          for (int64_t epoch : {0, 5}) cases.push_back({n, replicas, replicas - 1, shuffle, 42, drop_last, epoch});
  std::ostringstream input;
  for (const Case& c : cases)
    input << c.n << ' ' << c.replicas << ' ' << c.rank << ' ' << c.shuffle << ' ' << c.seed << ' ' << c.drop_last
          << ' ' << c.epoch << '\n';
  std::istringstream lines(run("/usr/bin/python3 " + kScript + " sampler", input.str()));
  for (const Case& c : cases) {
    std::string line;
    ASSERT_TRUE(std::getline(lines, line)) << "python printed too few lines";
    std::istringstream words(line);
    std::vector<int64_t> expected;
    for (int64_t v; words >> v;) expected.push_back(v);
    DistributedSampler sampler(c.n, c.replicas, c.rank, {c.shuffle, c.seed, c.drop_last});
    sampler.set_epoch(c.epoch);
    EXPECT_EQ(sampler.indices(), expected) << "n " << c.n << " replicas " << c.replicas << " shuffle " << c.shuffle
                                           << " drop_last " << c.drop_last << " epoch " << c.epoch;
  }
}

TEST(PyTorchReference, DdpEndsWithPyTorchsParameters) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(test_support::have_python_torch(), test_support::no_python_torch());
  const int kRanks = 2, kBatch = 6, kEpochs = 2;
  const uint64_t kSeed = 17;
  auto initial = make_model(7);
  const Data data = make_data(48, 99);

  // What both sides start from: the weights and the data set.
  c10::Dict<std::string, at::Tensor> blob;
  for (const auto& item : initial->named_parameters()) blob.insert(item.key(), item.value().detach().clone());
  blob.insert("x", data.x);
  blob.insert("y", data.y);
  const std::string in_path = ::testing::TempDir() + "/ddp_ref_in." + std::to_string(getpid()) + ".pt";
  const std::string out_path = ::testing::TempDir() + "/ddp_ref_out." + std::to_string(getpid()) + ".pt";
  {
    auto bytes = torch::pickle_save(blob);
    std::ofstream(in_path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  run("OMP_NUM_THREADS=1 /usr/bin/python3 " + kScript + " ddp " + in_path + " " + out_path + " " +
      std::to_string(kRanks) + " 2>&1");

  std::mutex mutex;
  torch::nn::Sequential ours;
  comm::run_thread_ranks(kRanks, [&](comm::Communicator& comm) {
    auto model = make_model(500 + comm.rank());
    if (comm.rank() == 0) copy_parameters(*initial, *model);
    DistributedDataParallel ddp(comm, model.ptr());
    DistributedSampler sampler(data.x.size(0), kRanks, comm.rank(), {/*shuffle=*/true, kSeed, /*drop_last=*/false});
    torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.01));
    for (int epoch = 0; epoch < kEpochs; ++epoch) {
      sampler.set_epoch(epoch);
      const auto indices = sampler.indices();
      for (size_t first = 0; first < indices.size(); first += kBatch) {
        const size_t count = std::min<size_t>(kBatch, indices.size() - first);
        auto rows = at::tensor(std::vector<int64_t>(indices.begin() + static_cast<long>(first),
                                                    indices.begin() + static_cast<long>(first + count)));
        compat::zero_grad(optimizer);
        ddp.forward([&] { return loss_of(model, data.x.index_select(0, rows), data.y.index_select(0, rows)); })
            .backward();
        optimizer.step();
      }
    }
    if (comm.rank() == 0) {
      std::lock_guard<std::mutex> lock(mutex);
      ours = model;
    }
  });

  std::ifstream in(out_path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(bytes.empty()) << "PyTorch wrote no parameters";
  auto theirs = torch::pickle_load(bytes).toGenericDict();
  test_support::Worst worst;
  size_t compared = 0;
  for (const auto& item : ours->named_parameters()) {
    ASSERT_TRUE(theirs.contains(item.key())) << item.key();
    worst.add(item.value(), theirs.at(item.key()).toTensor());
    ++compared;
  }
  EXPECT_EQ(compared, 6u);
  EXPECT_TRUE(test_support::exceeds(max_difference(*ours, *initial), 1e-2)) << "training did not move the weights";
  EXPECT_LT(worst.value, 1e-5) << "largest difference from PyTorch's DDP";
  std::printf("largest parameter difference from PyTorch DDP after %d steps: %.3g\n",
              kEpochs * static_cast<int>(48 / kRanks / kBatch), worst.value);
}

}  // namespace
}  // namespace distlab::ddp
