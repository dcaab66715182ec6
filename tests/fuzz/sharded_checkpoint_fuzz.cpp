// A ZeRO checkpoint (zero/sharded_checkpoint.hpp) loaded by a ZeRO-1 of one
// thread rank: the input is stage 0's manifest, model and state files cut
// at the separator line (fuzz_input.hpp). As in checkpoint_fuzz.cpp, bit 1
// of the first byte writes the manifest from the two .pt files, saying
// "stage 0 of W" with W the first piece's number (1 when none), so that the
// fuzzer reaches the shard's tables; bit 0 only rewrites the manifest's
// crc32 line. Every refusal is a CheckpointError, and nothing hangs or
// allocates what a hostile number asks for.
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "checkpoint/crc32.hpp"
#include "comm/threads_backend.hpp"
#include "fuzz_input.hpp"
#include "zero/optimizer_factory.hpp"
#include "zero/sharded_checkpoint.hpp"

using namespace distlab;
using checkpoint::crc32;
using checkpoint::crc32_hex;

namespace {

std::string with_right_crc(const std::string& manifest) {
  const size_t last = manifest.rfind("crc32 ");
  const std::string body = manifest.substr(0, last == std::string::npos ? manifest.size() : last);
  return body + "crc32 " + crc32_hex(crc32(body.data(), body.size())) + "\n";
}

std::string file_line(const std::string& name, const std::string& bytes) {
  return "file " + name + " " + std::to_string(bytes.size()) + " " + crc32_hex(crc32(bytes.data(), bytes.size())) + "\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::vector<std::string> files = fuzz::pieces(data + 1, size - 1, 3);
  files.resize(3);
  if (mode & 2) {
    const long long writers = std::atoll(files[0].c_str());
    files[0] = with_right_crc("distlab-checkpoint 1\nstep 1\nstage 0 of " + std::to_string(writers < 1 ? 1 : writers) +
                              "\n" + file_line("stage0.model.pt", files[1]) + file_line("stage0.state.pt", files[2]));
  } else if (mode & 1) {
    files[0] = with_right_crc(files[0]);
  }
  const std::string dir = fuzz::scratch_folder("sharded");
  const zero::ShardedCheckpointer checkpoints(dir, /*keep_last=*/1);
  const std::string folder = checkpoints.folder(1);
  std::filesystem::create_directories(folder);
  const char* names[] = {"stage0.manifest", "stage0.model.pt", "stage0.state.pt"};
  for (size_t i = 0; i < files.size(); ++i) fuzz::write_bytes(folder + "/" + names[i], files[i]);

  checkpoints.latest_complete([](const std::string&) {});
  const auto world = comm::make_thread_world(1);
  const auto comm = comm::make_thread_communicator(world, 0);
  torch::nn::Sequential model(torch::nn::Linear(3, 4), torch::nn::Linear(4, 2));
  zero::Zero1 zero(*comm, *model, zero::adam(torch::optim::AdamOptions(0.01)));
  try {
    checkpoints.load(1, zero, *model);
  } catch (const checkpoint::CheckpointError&) {
  }
  return 0;
}
