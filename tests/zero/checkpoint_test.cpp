// Sharded checkpoints on thread ranks: saved by 4 ranks and resumed on 2
// and 3 (ZeRO-1, -2, -3; Adam and SGD with momentum; and across stages),
// training ends where the uninterrupted 4-rank run ends; re-sharding 4 -> 3
// -> 4 gives back the same bytes; the segments of any layout tile every
// parameter once; Python's torch.load reads the whole model, and the shards
// put together equal it; a damaged shard or another model is refused with
// one line naming the file or the parameter, and nothing is changed.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "../train/run_command.hpp"
#include "checkpoint_checks.hpp"
#include "comm/threads_backend.hpp"
#include "support/differences.hpp"
#include "support/python_torch.hpp"
#include "support/required_tool.hpp"
#include "checkpoint/crc32.hpp"
#include "checkpoint/files.hpp"
#include "zero/shard_segments.hpp"
#include "zero/sharded_checkpoint.hpp"
#include "zero_checks.hpp"

namespace distlab::zero {
namespace {

namespace fs = std::filesystem;
using comm::Communicator;
using testing::Optimizer;
using testing::Sharding;
using testing::TrainSteps;

std::string fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("distlab_zero_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// train_steps on `ranks` thread ranks; every rank's result, by rank.
std::vector<at::Tensor> run(int ranks, const TrainSteps& steps) {
  std::vector<at::Tensor> results(static_cast<size_t>(ranks));
  comm::run_thread_ranks(ranks, [&](Communicator& comm) {
    results[static_cast<size_t>(comm.rank())] = testing::train_steps(comm, steps);
  });
  return results;
}

using test_support::largest_difference;

struct Case {
  Sharding saved;
  Sharding resumed;
  Optimizer optimizer;
};

std::string describe(const Case& c, int ranks) {
  return std::string(testing::to_string(c.saved)) + " saved on 4 ranks, " + testing::to_string(c.resumed) +
         " resumed on " + std::to_string(ranks) + ", " + testing::to_string(c.optimizer);
}

TEST(ShardedCheckpoint, ResumedOnTwoAndThreeRanksEndsWhereTheUninterruptedRunEnds) {
  const std::vector<Case> cases = {
      {Sharding::kZero1, Sharding::kZero1, Optimizer::kAdam},
      {Sharding::kZero1, Sharding::kZero1, Optimizer::kSgdMomentum},
      {Sharding::kZero2, Sharding::kZero2, Optimizer::kAdam},
      {Sharding::kZero2, Sharding::kZero2, Optimizer::kSgdMomentum},
      {Sharding::kZero3, Sharding::kZero3, Optimizer::kAdam},
      {Sharding::kZero3, Sharding::kZero3, Optimizer::kSgdMomentum},
      // The format does not depend on the stage: one stage's checkpoint resumes another.
      {Sharding::kZero1, Sharding::kZero3, Optimizer::kAdam},
      {Sharding::kZero3, Sharding::kZero2, Optimizer::kSgdMomentum},
      {Sharding::kZero2, Sharding::kZero1, Optimizer::kAdamWAmsgrad},
  };
  test_support::Worst worst;
  for (const Case& c : cases) {
    const std::string dir = fresh_dir("resume");
    const at::Tensor uninterrupted = run(4, {c.saved, c.optimizer, 0, testing::kLastStep, "", ""})[0];
    const at::Tensor at_save = run(4, {c.saved, c.optimizer, 0, testing::kSaveStep, "", dir})[0];
    // The last steps move the parameters well past the tolerance: an
    // optimizer state lost or misplaced on resume would show.
    ASSERT_TRUE(test_support::exceeds(largest_difference(uninterrupted, at_save), 1e-2)) << describe(c, 4);
    for (int ranks : {2, 3}) {
      const auto resumed = run(ranks, {c.resumed, c.optimizer, testing::kSaveStep, testing::kLastStep, dir, ""});
      for (int r = 0; r < ranks; ++r) {
        const double d = largest_difference(resumed[static_cast<size_t>(r)], uninterrupted);
        worst.add(d);
        EXPECT_LE(d, testing::kTolerance) << describe(c, ranks) << ", rank " << r;
      }
    }
  }
  std::cout << "[ resumed  ] " << cases.size() << " cases x {2, 3} ranks: max difference from the uninterrupted "
            << "4-rank run " << worst.value << " (tolerance " << testing::kTolerance << ")\n";
}

// Tensors of one state part, for bit-for-bit comparisons.
std::map<std::string, at::Tensor> shard_tensors(const std::string& file) {
  const auto state = torch::jit::pickle_load(checkpoint::read_whole_file(file)).toGenericDict();
  std::map<std::string, at::Tensor> tensors;
  for (const auto& item : state.at("tensors").toGenericDict())
    tensors[item.key().toStringRef()] = item.value().toTensor();
  return tensors;
}

// Loading moves elements and never computes on them: saved on 4, loaded on
// 3 and saved, loaded on 4 and saved again gives the first files' tensors
// bit for bit (parameters, exp_avg, exp_avg_sq, max_exp_avg_sq).
TEST(ShardedCheckpoint, ReshardingFourToThreeToFourGivesBackTheSameBytes) {
  for (Sharding sharding : {Sharding::kZero2, Sharding::kZero3}) {
    const std::string a = fresh_dir("exact_a"), b = fresh_dir("exact_b"), c = fresh_dir("exact_c");
    run(4, {sharding, Optimizer::kAdamWAmsgrad, 0, testing::kSaveStep, "", a});
    run(3, {sharding, Optimizer::kAdamWAmsgrad, testing::kSaveStep, testing::kSaveStep, a, b});
    run(4, {sharding, Optimizer::kAdamWAmsgrad, testing::kSaveStep, testing::kSaveStep, b, c});
    const ShardedCheckpointer first(a), last(c);
    EXPECT_EQ(first.writers(testing::kSaveStep), 4);
    EXPECT_EQ(ShardedCheckpointer(b).writers(testing::kSaveStep), 3);
    int tensors = 0;
    for (int w = 0; w < 4; ++w) {
      const auto before = shard_tensors(first.state_file(testing::kSaveStep, w));
      const auto after = shard_tensors(last.state_file(testing::kSaveStep, w));
      ASSERT_EQ(before.size(), after.size()) << "writer " << w;
      for (const auto& [key, t] : before) {
        ASSERT_TRUE(after.count(key)) << key;
        EXPECT_TRUE(at::equal(t, after.at(key))) << testing::to_string(sharding) << " writer " << w << " " << key;
        ++tensors;
      }
    }
    EXPECT_GT(tensors, 4 * 4);  // shards of parameters and three Adam fields on every writer
  }
}

// On paper: for every world size, the segments of all ranks cover each
// parameter's elements exactly once, and each lies inside its rank's chunk.
TEST(ShardSegments, TileEveryParameterOnceForAnyWorldSize) {
  ddp::BucketPlan plan;
  for (int64_t numel : {54, 9, 63, 7, 21, 3, 1}) plan.params.push_back({"p" + std::to_string(numel), numel});
  plan.buckets = {{{6, 5, 4}, 0, 25, 0}, {{3, 2}, 0, 70, 0}, {{1, 0}, 0, 63, 0}};
  for (int p : {1, 2, 3, 4, 5, 7, 13, 200}) {
    const ShardLayout layout = make_shard_layout(plan, p);
    std::vector<std::vector<int>> covered;
    for (const auto& info : plan.params) covered.emplace_back(static_cast<size_t>(info.numel), 0);
    for (int r = 0; r < p; ++r) {
      std::vector<int> params_seen;
      for (const Segment& s : shard_segments(layout, r)) {
        const collectives::Range chunk = layout.chunk(s.bucket, r);
        EXPECT_GT(s.length, 0);
        EXPECT_LE(s.chunk_offset + s.length, chunk.count) << "p " << p << " rank " << r;
        for (int64_t e = s.offset; e < s.offset + s.length; ++e) ++covered[static_cast<size_t>(s.param)][e];
        params_seen.push_back(s.param);
      }
      std::sort(params_seen.begin(), params_seen.end());
      EXPECT_EQ(std::adjacent_find(params_seen.begin(), params_seen.end()), params_seen.end())
          << "two segments of one parameter on rank " << r;
    }
    for (size_t i = 0; i < covered.size(); ++i)
      for (size_t e = 0; e < covered[i].size(); ++e)
        ASSERT_EQ(covered[i][e], 1) << "p " << p << ": element " << e << " of " << plan.params[i].name;
  }
  // Rank 1 of 3 in the one-bucket picture of shard_segments.hpp.
  ddp::BucketPlan one;
  one.params = {{"w", 6}, {"b", 3}};
  one.buckets = {{{0, 1}, 36, 9, 36}};
  const auto mid = shard_segments(make_shard_layout(one, 3), 1);
  ASSERT_EQ(mid.size(), 1u);
  EXPECT_EQ(mid[0].param, 0);
  EXPECT_EQ(mid[0].offset, 3);
  EXPECT_EQ(mid[0].length, 3);
}

// Python's torch.load reads stage0.model.pt as the model's state_dict, and
// puts each parameter back together from the writers' shard/<name> segments
// (each element exactly once); both must equal the ranks' whole parameters,
// byte for byte (CRC-32 by zlib against the library's own).
TEST(ShardedCheckpoint, PythonTorchLoadReadsTheModelAndTheShardsAddUpToIt) {
  DISTLAB_SKIP_OR_FAIL_WITHOUT(test_support::have_python_torch(), test_support::no_python_torch());
  const std::string script = fresh_dir("python_script") + "/read.py";
  std::ofstream(script) << R"PY(
import glob, sys, zlib, torch
folder = sys.argv[1]
model = torch.load(folder + "/stage0.model.pt")
net = torch.nn.Sequential(torch.nn.Linear(6, 9), torch.nn.Tanh(), torch.nn.Linear(9, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
net.load_state_dict(model, strict=True)
whole = {name: torch.zeros(t.numel()) for name, t in model.items()}
times = {name: torch.zeros(t.numel(), dtype=torch.int64) for name, t in model.items()}
for f in sorted(glob.glob(folder + "/stage*.state.pt")):
    state = torch.load(f)
    for key, t in state["tensors"].items():
        if not key.startswith("shard/"): continue
        name = key[len("shard/"):]
        at = state["ints"][key + "/offset"]
        whole[name][at:at + t.numel()] = t
        times[name][at:at + t.numel()] += 1
for name, t in sorted(model.items()):
    print("model", name, "x".join(map(str, t.shape)), "%08x" % zlib.crc32(t.contiguous().numpy().tobytes()))
    print("shards", name, "x".join(map(str, t.shape)), "%08x" % zlib.crc32(whole[name].numpy().tobytes()),
          "once" if bool((times[name] == 1).all()) else "NOT-ONCE")
)PY";
  for (Sharding sharding : {Sharding::kZero1, Sharding::kZero3}) {
    const std::string dir = fresh_dir("python");
    const int ranks = sharding == Sharding::kZero1 ? 4 : 3;
    const at::Tensor full = run(ranks, {sharding, Optimizer::kAdam, 0, testing::kSaveStep, "", dir})[0];
    const auto r = train::testing::run_command(
        "/usr/bin/python3 " + script + " " + ShardedCheckpointer(dir).folder(testing::kSaveStep), 120);
    ASSERT_EQ(r.status, 0) << r.output;
    // The whole parameters the ranks hold, cut by name (registration order).
    auto model = torch::nn::Sequential(torch::nn::Linear(6, 9), torch::nn::Tanh(), torch::nn::Linear(9, 7),
                                       torch::nn::Tanh(), torch::nn::Linear(7, 3));
    std::map<std::string, std::string> expected;
    int64_t offset = 0;
    for (const auto& item : model->named_parameters()) {
      const at::Tensor piece = full.narrow(0, offset, item.value().numel()).contiguous();
      offset += item.value().numel();
      std::string dims;
      for (auto d : item.value().sizes()) dims += (dims.empty() ? "" : "x") + std::to_string(d);
      const std::string crc = checkpoint::crc32_hex(checkpoint::crc32(piece.data_ptr(), piece.numel() * 4)).substr(2);
      expected["model " + item.key()] = dims + " " + crc;
      expected["shards " + item.key()] = dims + " " + crc + " once";
    }
    int seen = 0;
    for (const auto& line : train::testing::lines_of(r.output)) {
      std::istringstream in(line);
      std::string kind, name, rest;
      in >> kind >> name;
      std::getline(in, rest);
      if (kind != "model" && kind != "shards") continue;  // a warning
      ++seen;
      ASSERT_TRUE(expected.count(kind + " " + name)) << line;
      EXPECT_EQ(rest.substr(1), expected[kind + " " + name]) << testing::to_string(sharding) << ": " << line;
    }
    EXPECT_EQ(seen, static_cast<int>(expected.size())) << r.output;
  }
}

// Runs `body` on `ranks` thread ranks; each rank's CheckpointError message
// ("" if it threw none).
std::vector<std::string> errors_of(int ranks, const std::function<void(Communicator&)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  comm::run_thread_ranks(ranks, [&](Communicator& comm) {
    try {
      body(comm);
    } catch (const checkpoint::CheckpointError& e) {
      errors[static_cast<size_t>(comm.rank())] = e.what();
    }
  });
  return errors;
}

// Loads `dir`'s step 3 into a ZeRO-1 on `ranks` ranks; the errors, and
// whether any rank's parameters changed (they must not when it is refused).
std::vector<std::string> load_zero1(const std::string& dir, int ranks, bool* changed) {
  std::mutex mutex;
  *changed = false;
  return errors_of(ranks, [&](Communicator& comm) {
    torch::nn::Sequential model(torch::nn::Linear(6, 9), torch::nn::Tanh(), torch::nn::Linear(9, 7), torch::nn::Tanh(),
                                torch::nn::Linear(7, 3));
    Zero1 zero(comm, *model, adam(torch::optim::AdamOptions(0.01)));
    std::vector<at::Tensor> before;
    for (const auto& p : model->parameters()) before.push_back(p.detach().clone());
    try {
      ShardedCheckpointer(dir).load(testing::kSaveStep, zero, *model);
    } catch (...) {
      for (size_t i = 0; i < before.size(); ++i)
        if (!at::equal(before[i], model->parameters()[i])) {
          std::lock_guard<std::mutex> lock(mutex);
          *changed = true;
        }
      throw;
    }
  });
}

void flip_byte(const std::string& file) {
  std::vector<char> bytes = checkpoint::read_whole_file(file);
  bytes[bytes.size() / 2] ^= 0x20;
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void truncate_half(const std::string& file) { fs::resize_file(file, fs::file_size(file) / 2); }

// Every rank refused with one line; the ranks that read `file` name it and
// `why`, the others name exactly those ranks. Returns the ranks that named it.
std::string expect_refused(const std::vector<std::string>& errors, const std::string& file, const std::string& why) {
  std::string naming;
  for (size_t r = 0; r < errors.size(); ++r)
    if (errors[r].find(file) != std::string::npos) naming += (naming.empty() ? "" : ", ") + std::to_string(r);
  EXPECT_FALSE(naming.empty()) << "no rank named " << file;
  for (size_t r = 0; r < errors.size(); ++r) {
    const std::string& e = errors[r];
    EXPECT_FALSE(e.empty()) << "rank " << r << " loaded a damaged checkpoint";
    EXPECT_EQ(e.find('\n'), std::string::npos) << "not one line: " << e;
    EXPECT_EQ(e.rfind("rank " + std::to_string(r) + ": ZeRO-1 checkpoint", 0), 0u) << e;
    if (e.find(file) != std::string::npos)
      EXPECT_NE(e.find(why), std::string::npos) << e;
    else
      EXPECT_NE(e.find("rank(s) " + naming + " failed (their errors name the file and why)"), std::string::npos) << e;
  }
  return naming;
}

TEST(ShardedCheckpoint, DamagedShardIsRefusedNamingItsFile) {
  const std::string dir = fresh_dir("damaged");
  run(4, {Sharding::kZero1, Optimizer::kAdam, 0, testing::kSaveStep, "", dir});
  const ShardedCheckpointer checkpoints(dir);
  bool changed = false;
  // Intact, it loads on 2 ranks.
  for (const auto& e : load_zero1(dir, 2, &changed)) EXPECT_EQ(e, "");

  // One flipped byte in writer 2's shard. The loaders keep one bucket, the
  // writers had three, so which loaders read writer 2 depends on both
  // layouts; every rank refuses and none changes its model.
  const std::string flipped = checkpoints.state_file(testing::kSaveStep, 2);
  const std::vector<char> intact = checkpoint::read_whole_file(flipped);
  flip_byte(flipped);
  expect_refused(load_zero1(dir, 2, &changed), flipped, "is corrupt: crc32");
  EXPECT_FALSE(changed);
  checkpoint::write_file_atomically(flipped, intact);

  // Writer 3 holds the ends of the writers' buckets: 0.weight [41, 54),
  // 2.weight [45, 63), 4.weight [17, 21), 4.bias. Loaded on 4 ranks in one
  // bucket, rank 0 owns 0.weight [0, 40) only and never reads it: it names
  // the ranks that failed.
  const std::string last = checkpoints.state_file(testing::kSaveStep, 3);
  const std::vector<char> last_intact = checkpoint::read_whole_file(last);
  flip_byte(last);
  EXPECT_EQ(expect_refused(load_zero1(dir, 4, &changed), last, "is corrupt: crc32"), "1, 2, 3");
  EXPECT_FALSE(changed);
  checkpoint::write_file_atomically(last, last_intact);

  // Writer 1's shard cut in half, loaded on 3 ranks.
  const std::string cut = checkpoints.state_file(testing::kSaveStep, 1);
  const std::vector<char> whole = checkpoint::read_whole_file(cut);
  truncate_half(cut);
  expect_refused(load_zero1(dir, 3, &changed), cut, "is truncated");
  EXPECT_FALSE(changed);
  EXPECT_FALSE(checkpoints.latest_complete().has_value());
  checkpoint::write_file_atomically(cut, whole);
  EXPECT_EQ(checkpoints.latest_complete(), std::optional<std::int64_t>(testing::kSaveStep));

  // Writer 3 never finished: no manifest.
  const std::string fresh = fresh_dir("unfinished");
  run(4, {Sharding::kZero1, Optimizer::kAdam, 0, testing::kSaveStep, "", fresh});
  const ShardedCheckpointer unfinished(fresh);
  ASSERT_EQ(unfinished.latest_complete(), std::optional<std::int64_t>(testing::kSaveStep));
  fs::remove(unfinished.manifest_file(testing::kSaveStep, 3));
  expect_refused(load_zero1(fresh, 2, &changed), "stage 3 has no manifest", "stage 3 has no manifest");
  std::vector<std::string> reports;
  EXPECT_FALSE(unfinished.latest_complete([&](const std::string& line) { reports.push_back(line); }).has_value());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find("stage 3 has no manifest"), std::string::npos) << reports[0];
}

// Another model: refused on every rank, naming the first parameter that differs.
TEST(ShardedCheckpoint, AnotherModelIsRefusedNamingTheParameter) {
  const std::string dir = fresh_dir("mismatch");
  run(4, {Sharding::kZero1, Optimizer::kAdam, 0, testing::kSaveStep, "", dir});
  struct Other {
    std::function<torch::nn::Sequential()> make;
    std::string says;
  };
  const std::vector<Other> others = {
      {[] {
         return torch::nn::Sequential(torch::nn::Linear(6, 9), torch::nn::Tanh(), torch::nn::Linear(9, 8),
                                      torch::nn::Tanh(), torch::nn::Linear(8, 3));
       },
       "parameter '2.weight' is 7x9 Float in the checkpoint, 8x9 Float in this model"},
      {[] {
         return torch::nn::Sequential(torch::nn::Linear(6, 9), torch::nn::Tanh(), torch::nn::Linear(9, 7),
                                      torch::nn::Tanh(), torch::nn::Linear(7, 3), torch::nn::Linear(3, 3));
       },
       "this model's parameter '5.weight' (3x3 Float) is not in the checkpoint"},
      {[] { return torch::nn::Sequential(torch::nn::Linear(6, 9), torch::nn::Tanh(), torch::nn::Linear(9, 7)); },
       "the checkpoint's parameter '4.weight' (3x7 Float) is not in this model"},
  };
  for (const Other& other : others)
    for (bool three : {false, true}) {
      const auto errors = errors_of(3, [&](Communicator& comm) {
        auto model = other.make();
        if (three) {
          Zero3 zero(comm, model, adam(torch::optim::AdamOptions(0.01)));
          ShardedCheckpointer(dir).load(testing::kSaveStep, zero);
        } else {
          Zero2 zero(comm, *model, adam(torch::optim::AdamOptions(0.01)));
          ShardedCheckpointer(dir).load(testing::kSaveStep, zero, *model);
        }
      });
      for (const std::string& e : errors) {
        EXPECT_NE(e.find("does not fit this model: " + other.says), std::string::npos) << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
      }
    }
}

}  // namespace
}  // namespace distlab::zero
