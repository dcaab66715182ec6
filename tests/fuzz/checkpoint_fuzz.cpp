// A checkpoint's stage, as the per-stage checkpointer reads it
// (checkpoint/checkpointer.hpp), then loaded into a module
// (checkpoint/module_state.hpp). The input is four files cut at the
// separator line (fuzz_input.hpp): stage0.manifest, stage0.model.pt,
// stage0.state.pt and stage1.manifest of step 1. A checksum stops a random
// byte long before the parser behind it, so the first byte can put them
// right: bit 1 writes stage 0's manifest from the two .pt files (the
// fuzzer then reaches the unpickler and the state's tables), else bit 0
// rewrites the manifest's own crc32 line (it reaches the manifest's
// parser). Bit 2 reads the checkpoint as a job that accepts any stage
// count. Every refusal is a CheckpointError.
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

#include "checkpoint/checkpointer.hpp"
#include "checkpoint/crc32.hpp"
#include "checkpoint/module_state.hpp"
#include "fuzz_input.hpp"

using namespace distlab::checkpoint;

namespace {

std::string with_right_crc(const std::string& manifest) {
  const size_t last = manifest.rfind("crc32 ");
  const std::string body = manifest.substr(0, last == std::string::npos ? manifest.size() : last);
  return body + "crc32 " + crc32_hex(crc32(body.data(), body.size())) + "\n";
}

std::string manifest_of(const std::string& model, const std::string& state) {
  std::string body = "distlab-checkpoint 1\nstep 1\nstage 0 of 1\n";
  body += "file stage0.model.pt " + std::to_string(model.size()) + " " + crc32_hex(crc32(model.data(), model.size())) + "\n";
  body += "file stage0.state.pt " + std::to_string(state.size()) + " " + crc32_hex(crc32(state.data(), state.size())) + "\n";
  return with_right_crc(body);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::vector<std::string> files = distlab::fuzz::pieces(data + 1, size - 1, 4);
  files.resize(4);
  if (mode & 2) files[0] = manifest_of(files[1], files[2]);
  else if (mode & 1) files[0] = with_right_crc(files[0]);

  const std::string dir = distlab::fuzz::scratch_folder("checkpoint");
  Checkpointer checkpoints(dir, /*num_stages=*/1, /*keep_last=*/1);
  checkpoints.accept_any_stage_count(mode & 4);
  const std::string folder = checkpoints.folder(1);
  std::filesystem::create_directories(folder);
  const char* names[] = {"stage0.manifest", "stage0.model.pt", "stage0.state.pt", "stage1.manifest"};
  for (size_t i = 0; i < files.size(); ++i)
    if (i == 0 || !files[i].empty()) distlab::fuzz::write_bytes(folder + "/" + names[i], files[i]);

  checkpoints.problem(1);
  checkpoints.latest_complete([](const std::string&) {});
  checkpoints.stages_of(1);
  try {
    const CheckpointPart part = checkpoints.load(1, 0);
    torch::nn::Linear module(2, 3);
    load_named_state(*module, part.model);
  } catch (const CheckpointError&) {
  }
  return 0;
}
