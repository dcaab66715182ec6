// Checkpoints: a round trip is bit-exact; a truncated or bit-flipped newest
// checkpoint is refused with one line and the one before it is used; the
// last K are kept; a crash before the rename leaves the old one intact; a
// checkpoint is complete only when every stage's part is; and Python's
// torch.load reads the model part as a state_dict with the same values.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "checkpoint/checkpointer.hpp"
#include "checkpoint/crc32.hpp"
#include "checkpoint/files.hpp"
#include "checkpoint/module_state.hpp"
#include "run_command.hpp"

namespace distlab::checkpoint {
namespace {

namespace fs = std::filesystem;
using train::testing::contains;
using train::testing::run_command;

std::string fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("distlab_train_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// fc1 (3 -> 4), bn (4): parameters and buffers, as a small model has them.
struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(3, 4));
    bn = register_module("bn", torch::nn::BatchNorm1d(4));
  }
  torch::nn::Linear fc1{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};

// A part with every kind of value, step-dependent so that parts differ.
CheckpointPart sample_part(std::int64_t step) {
  at::manual_seed(step);
  Net net;
  net.bn->forward(at::randn({5, 4}));  // moves the running statistics off their start
  CheckpointPart part;
  for (const auto& [name, tensor] : named_state(net)) part.model[name] = tensor.detach().clone();
  part.tensors["optimizer/momentum/fc1.weight"] = at::randn({4, 3});
  part.tensors["optimizer/odd values"] =
      at::tensor({0.0, -0.0, std::numeric_limits<double>::quiet_NaN(), 1e-310, -INFINITY}, at::kDouble);
  part.tensors["optimizer/counts"] = at::arange(7, at::kLong) * step;
  auto generator = at::detail::createCPUGenerator(step);
  part.tensors["rng/data"] = generator.get_state();
  part.ints = {{"epoch", step / 10}, {"step", step}, {"data_position", step * 32}};
  part.reals = {{"scheduler/lr", 5.0 * std::pow(0.95, step)}, {"negative", -1.25}};
  part.texts = {{"note", "step " + std::to_string(step) + " \xc3\xa9"}};
  return part;
}

// Same dtype, shape and bytes (so NaN, -0.0 and subnormals count too).
bool bit_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  at::Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

void expect_same(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, tensor] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(bit_equal(tensor, b.at(name))) << name;
  }
}

void expect_same(const CheckpointPart& a, const CheckpointPart& b) {
  expect_same(a.model, b.model);
  expect_same(a.tensors, b.tensors);
  EXPECT_EQ(a.ints, b.ints);
  EXPECT_EQ(a.reals, b.reals);
  EXPECT_EQ(a.texts, b.texts);
}

// Cuts the file to half its size.
void truncate_half(const std::string& path) { fs::resize_file(path, fs::file_size(path) / 2); }

void flip_bit(const std::string& path, std::uintmax_t at_byte, int bit) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(static_cast<std::streamoff>(at_byte));
  char c = 0;
  file.read(&c, 1);
  c = static_cast<char>(c ^ (1 << bit));
  file.seekp(static_cast<std::streamoff>(at_byte));
  file.write(&c, 1);
}

std::vector<std::string> collect(const Checkpointer& c, std::optional<std::int64_t>* latest) {
  std::vector<std::string> lines;
  *latest = c.latest_complete([&](const std::string& line) { lines.push_back(line); });
  return lines;
}

TEST(Crc32, CheckValueAndTheBitwiseReference) {
  const std::string check = "123456789";  // CRC-32's published check value
  EXPECT_EQ(crc32(check.data(), check.size()), 0xCBF43926u);
  EXPECT_EQ(crc32_bitwise(check.data(), check.size()), 0xCBF43926u);
  EXPECT_EQ(crc32(nullptr, 0), 0u);
  std::mt19937 random(7);
  std::vector<char> bytes(10007);
  for (auto& b : bytes) b = static_cast<char>(random());
  const std::uint32_t whole = crc32(bytes.data(), bytes.size());
  EXPECT_EQ(whole, crc32_bitwise(bytes.data(), bytes.size()));
  // In two pieces, continued.
  EXPECT_EQ(crc32(bytes.data() + 5000, bytes.size() - 5000, crc32(bytes.data(), 5000)), whole);
  EXPECT_EQ(crc32_hex(0xCBF43926u), "0xcbf43926");
}

TEST(Checkpoint, RoundTripIsBitExact) {
  Checkpointer c(fresh_dir("round_trip"));
  const CheckpointPart part = sample_part(30);
  const std::string folder = c.save(30, 0, part);
  EXPECT_EQ(folder, c.dir() + "/step_000000030");
  EXPECT_EQ(c.latest_complete(), std::optional<std::int64_t>(30));
  const CheckpointPart back = c.load(30, 0);
  expect_same(part, back);
  // Full names of parameters and buffers, as Python's state_dict names them.
  for (const char* name : {"fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                           "bn.num_batches_tracked"})
    EXPECT_TRUE(back.model.count(name)) << name;
  // No temporary file is left after a clean save.
  for (const auto& item : fs::directory_iterator(folder))
    EXPECT_FALSE(is_temporary_file(item.path().filename().string())) << item.path();
}

TEST(Checkpoint, ModuleStateLoadsBackIntoAModule) {
  at::manual_seed(1);
  Net a;
  a.bn->forward(at::randn({5, 4}));
  at::manual_seed(2);
  Net b;
  EXPECT_NE(state_digest(named_state(a)), state_digest(named_state(b)));
  load_named_state(b, named_state(a));
  EXPECT_EQ(state_digest(named_state(a)), state_digest(named_state(b)));
  expect_same(named_state(a), named_state(b));

  auto wrong = named_state(a);
  wrong.erase("bn.running_var");
  wrong["fc2.weight"] = at::zeros({1});
  wrong["fc1.bias"] = at::zeros({5});
  try {
    load_named_state(b, wrong);
    FAIL() << "accepted a model with other names";
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "missing bn.running_var")) << m;
    EXPECT_TRUE(contains(m, "unexpected fc2.weight")) << m;
    EXPECT_TRUE(contains(m, "different fc1.bias")) << m;
  }
}

TEST(Checkpoint, TruncatedNewestIsRefusedAndThePreviousUsed) {
  Checkpointer c(fresh_dir("truncated"));
  c.save(10, 0, sample_part(10));
  c.save(20, 0, sample_part(20));
  truncate_half(c.model_file(20, 0));
  std::optional<std::int64_t> latest;
  const auto lines = collect(c, &latest);
  EXPECT_EQ(latest, std::optional<std::int64_t>(10));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(contains(lines[0], "step_000000020")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "stage0.model.pt is truncated")) << lines[0];
  EXPECT_EQ(lines[0].find('\n'), std::string::npos);
  expect_same(sample_part(10), c.load(10, 0));
  try {
    c.load(20, 0);
    FAIL() << "loaded a truncated checkpoint";
  } catch (const CheckpointError& e) {
    EXPECT_TRUE(contains(e.what(), "truncated")) << e.what();
  }
}

TEST(Checkpoint, BitFlippedNewestIsRefusedAndThePreviousUsed) {
  for (const char* which : {"model", "state", "manifest"}) {
    SCOPED_TRACE(which);
    Checkpointer c(fresh_dir(std::string("flipped_") + which));
    c.save(10, 0, sample_part(10));
    c.save(20, 0, sample_part(20));
    const std::string path = std::string(which) == "model"   ? c.model_file(20, 0)
                             : std::string(which) == "state" ? c.state_file(20, 0)
                                                             : c.manifest_file(20, 0);
    flip_bit(path, fs::file_size(path) / 3, 4);
    std::optional<std::int64_t> latest;
    const auto lines = collect(c, &latest);
    EXPECT_EQ(latest, std::optional<std::int64_t>(10));
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_TRUE(contains(lines[0], path)) << lines[0];
    EXPECT_TRUE(contains(lines[0], "corrupt") || contains(lines[0], "fails its checksum")) << lines[0];
    EXPECT_THROW(c.load(20, 0), CheckpointError);
    expect_same(sample_part(10), c.load(10, 0));
  }
}

TEST(Checkpoint, KeepsTheLastK) {
  Checkpointer c(fresh_dir("keep"), /*num_stages=*/1, /*keep_last=*/2);
  for (std::int64_t step : {10, 20, 30, 40}) c.save(step, 0, sample_part(step));
  EXPECT_EQ(c.steps(), (std::vector<std::int64_t>{40, 30}));
  expect_same(sample_part(30), c.load(30, 0));
  // A corrupt newest one does not count among the K: the pruning keeps two
  // good ones.
  truncate_half(c.state_file(40, 0));
  c.save(50, 0, sample_part(50));
  EXPECT_EQ(c.steps(), (std::vector<std::int64_t>{50, 40, 30}));
}

TEST(Checkpoint, CompleteOnlyWhenEveryStageIsThere) {
  Checkpointer c(fresh_dir("stages"), /*num_stages=*/2, /*keep_last=*/2);
  // Stage 0 holds fc1.*, stage 1 holds bn.*: disjoint names of one model.
  auto stage_part = [](std::int64_t step, const std::string& prefix) {
    CheckpointPart part = sample_part(step), mine;
    for (const auto& [name, t] : part.model)
      if (name.rfind(prefix, 0) == 0) mine.model[name] = t;
    mine.ints = part.ints;
    return mine;
  };
  c.save(10, 0, stage_part(10, "fc1."));
  c.save(10, 1, stage_part(10, "bn."));
  c.save(20, 0, stage_part(20, "fc1."));  // stage 1 has not written step 20 yet
  std::optional<std::int64_t> latest;
  auto lines = collect(c, &latest);
  EXPECT_EQ(latest, std::optional<std::int64_t>(10));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(contains(lines[0], "stage 1 has no manifest")) << lines[0];
  c.save(20, 1, stage_part(20, "bn."));
  lines = collect(c, &latest);
  EXPECT_EQ(latest, std::optional<std::int64_t>(20));
  EXPECT_TRUE(lines.empty());
  // The parts together are the whole model.
  std::map<std::string, at::Tensor> whole;
  for (int stage = 0; stage < 2; ++stage)
    for (const auto& [name, t] : c.load(20, stage).model) EXPECT_TRUE(whole.emplace(name, t).second) << name;
  expect_same(whole, sample_part(20).model);
  // A reader with another stage count refuses with the reason.
  Checkpointer other(c.dir(), /*num_stages=*/3);
  lines = collect(other, &latest);
  EXPECT_FALSE(latest.has_value());
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(contains(lines[0], "2 stage(s), this one has 3")) << lines[0];
}

// A crash after writing but before the rename leaves a temporary file; the
// checkpoint it was replacing stays whole, and the next save clears it.
TEST(Checkpoint, ACrashBeforeTheRenameLeavesTheOldCheckpointIntact) {
  Checkpointer c(fresh_dir("atomic"));
  c.save(10, 0, sample_part(10));
  // The crashed writer was rewriting step 10's model part (a rerun) ...
  const std::string leftover10 = c.model_file(10, 0) + ".tmp-999999";
  std::ofstream(leftover10) << "half of a model";
  // ... and had started step 20: only a temporary file made it to disk.
  fs::create_directories(c.folder(20));
  const std::string leftover20 = c.model_file(20, 0) + ".tmp-999999";
  std::ofstream(leftover20) << "half";
  std::optional<std::int64_t> latest;
  const auto lines = collect(c, &latest);
  EXPECT_EQ(latest, std::optional<std::int64_t>(10));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(contains(lines[0], "step_000000020: stage 0 has no manifest")) << lines[0];
  expect_same(sample_part(10), c.load(10, 0));
  c.save(20, 0, sample_part(20));
  EXPECT_FALSE(fs::exists(leftover20));
  EXPECT_EQ(c.latest_complete(), std::optional<std::int64_t>(20));
  expect_same(sample_part(20), c.load(20, 0));
}

TEST(Checkpoint, AtomicWriteReplacesWholeFiles) {
  const std::string dir = fresh_dir("atomic_write");
  const std::string path = dir + "/f.bin";
  write_file_atomically(path, std::vector<char>(1000, 'a'));
  write_file_atomically(path, std::vector<char>(10, 'b'));
  EXPECT_EQ(read_whole_file(path), std::vector<char>(10, 'b'));
  int entries = 0;
  for (const auto& item : fs::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(item.path().filename(), "f.bin");
  }
  EXPECT_EQ(entries, 1);
  try {
    write_file_atomically(dir + "/no/such/folder/f.bin", {'x'});
    FAIL() << "wrote into a missing folder";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "no/such/folder")) << e.what();
  }
}

// Python reads the model part with torch.load as a state_dict, loads it into
// the same model written in Python, and prints each tensor's CRC-32 by
// zlib (an independent implementation) and its first value; the state file
// and the manifest's checksums are read too.
TEST(Checkpoint, PythonTorchLoadReadsTheModelPart) {
  Checkpointer c(fresh_dir("python"));
  const CheckpointPart part = sample_part(40);
  c.save(40, 0, part);
  const std::string script = c.dir() + "/read.py";
  std::ofstream(script) << R"PY(
import sys, zlib, torch
model_file, state_file, manifest = sys.argv[1:4]
sd = torch.load(model_file)
net = torch.nn.Module()
net.fc1 = torch.nn.Linear(3, 4)
net.bn = torch.nn.BatchNorm1d(4)
net.load_state_dict(sd, strict=True)
for name, t in sorted(sd.items()):
    print("model", name, str(t.dtype), "x".join(map(str, t.shape)), "%08x" % zlib.crc32(t.numpy().tobytes()), repr(t.flatten()[0].item()))
state = torch.load(state_file)
for name, v in sorted(state["ints"].items()):
    print("int", name, v)
print("rng", "%08x" % zlib.crc32(state["tensors"]["rng/data"].numpy().tobytes()))
for line in open(manifest):
    if line.startswith("file "):
        _, name, size, crc = line.split()
        data = open(model_file.rsplit("/", 1)[0] + "/" + name, "rb").read()
        print("file", name, len(data) == int(size), "%08x" % zlib.crc32(data) == crc[2:])
)PY";
  const auto r = run_command("/usr/bin/python3 " + script + " " + c.model_file(40, 0) + " " + c.state_file(40, 0) +
                                 " " + c.manifest_file(40, 0),
                             60);
  ASSERT_EQ(r.status, 0) << r.output;
  auto hex = [](std::uint32_t v) { return crc32_hex(v).substr(2); };
  auto bytes_crc = [&](const at::Tensor& t) {
    at::Tensor x = t.contiguous();
    return hex(crc32(x.data_ptr(), x.numel() * x.element_size()));
  };
  std::map<std::string, std::string> expected;
  for (const auto& [name, t] : part.model) {
    std::string dims;
    for (auto d : t.sizes()) dims += (dims.empty() ? "" : "x") + std::to_string(d);
    const std::string dtype = t.scalar_type() == at::kLong ? "torch.int64" : "torch.float32";
    const at::Tensor first = t.flatten()[0];
    char value[64];
    if (t.scalar_type() == at::kLong)
      std::snprintf(value, sizeof value, "%lld", static_cast<long long>(first.item<int64_t>()));
    else  // Python's repr of a double: shortest round-trip text
      std::snprintf(value, sizeof value, "%.17g", first.item<double>());
    expected["model " + name] = dtype + " " + dims + " " + bytes_crc(t) + " " + value;
  }
  int models = 0;
  for (const auto& line : train::testing::lines_of(r.output)) {
    std::istringstream in(line);
    std::string kind, name;
    in >> kind >> name;
    std::string rest;
    std::getline(in, rest);
    if (rest.empty()) continue;  // not one of the script's lines (a warning)
    rest = rest.substr(1);
    if (kind == "model") {
      ++models;
      ASSERT_TRUE(expected.count("model " + name)) << line;
      const std::string want = expected["model " + name];
      // Compare all but the printed value, then the value as a number.
      const auto cut = want.rfind(' ');
      EXPECT_EQ(rest.substr(0, cut), want.substr(0, cut)) << line;
      EXPECT_EQ(std::stod(rest.substr(cut + 1)), std::stod(want.substr(cut + 1))) << line;
    } else if (kind == "int") {
      EXPECT_EQ(std::stoll(rest), part.ints.at(name)) << line;
    } else if (kind == "rng") {
      EXPECT_EQ(name, bytes_crc(part.tensors.at("rng/data"))) << line;
    } else if (kind == "file") {
      EXPECT_EQ(rest, "True True") << line;
    }
  }
  EXPECT_EQ(models, static_cast<int>(part.model.size())) << r.output;
}

}  // namespace
}  // namespace distlab::checkpoint
