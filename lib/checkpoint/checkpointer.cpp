#include "checkpoint/checkpointer.hpp"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "checkpoint/crc32.hpp"
#include "checkpoint/pickle_scan.hpp"
#include "checkpoint/files.hpp"

namespace distlab::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr const char* kManifestHeader = "distlab-checkpoint 1";
constexpr const char* kFolderPrefix = "step_";

std::string stage_name(int stage) { return "stage" + std::to_string(stage); }

// What a manifest promises about one file.
struct FileEntry {
  std::string name;
  std::uint64_t size = 0;
  std::uint32_t crc = 0;
};

struct Manifest {
  std::int64_t step = -1;
  int stage = -1;
  int num_stages = 0;
  std::vector<FileEntry> files;
};

std::string manifest_text(const Manifest& m) {
  std::ostringstream out;
  out << kManifestHeader << "\nstep " << m.step << "\nstage " << m.stage << " of " << m.num_stages << "\n";
  for (const auto& f : m.files) out << "file " << f.name << " " << f.size << " " << crc32_hex(f.crc) << "\n";
  std::string body = out.str();
  return body + "crc32 " + crc32_hex(crc32(body.data(), body.size())) + "\n";
}

// Parses and checks the manifest's own CRC; "" or the reason it is unusable.
std::string parse_manifest(const std::vector<char>& bytes, Manifest& m) {
  const std::string text(bytes.begin(), bytes.end());
  const auto last = text.rfind("crc32 ");
  if (last == std::string::npos || (last > 0 && text[last - 1] != '\n'))
    return "is truncated (no closing crc32 line)";
  std::uint32_t stated = 0;
  if (std::sscanf(text.c_str() + last, "crc32 0x%x", &stated) != 1) return "has an unreadable crc32 line";
  const std::uint32_t actual = crc32(text.data(), last);
  if (stated != actual)
    return "fails its checksum (crc32 " + crc32_hex(actual) + ", written " + crc32_hex(stated) + ")";
  std::istringstream in(text.substr(0, last));
  std::string line;
  if (!std::getline(in, line) || line != kManifestHeader) return "does not start with '" + std::string(kManifestHeader) + "'";
  std::string word, of;
  while (in >> word) {
    if (word == "step") {
      in >> m.step;
    } else if (word == "stage") {
      in >> m.stage >> of >> m.num_stages;
    } else if (word == "file") {
      FileEntry f;
      std::string crc;
      in >> f.name >> f.size >> crc;
      // A plain name in this folder: the manifest must not send a reader elsewhere ("../x").
      if (f.name.empty() || f.name == "." || f.name == ".." || f.name.find('/') != std::string::npos)
        return "names a file '" + f.name + "' outside its folder";
      char* end = nullptr;
      const unsigned long value = std::strtoul(crc.c_str(), &end, 16);
      if (crc.empty() || *end != '\0' || value > 0xffffffffUL) return "has an unreadable crc32 '" + crc + "' for " + f.name;
      f.crc = static_cast<std::uint32_t>(value);
      m.files.push_back(f);
    } else {
      return "has an unknown line '" + word + "'";
    }
  }
  return "";
}

// Reads the part of `stage` in `folder` and checks it against its manifest.
// Returns "" and fills `contents` (file name -> bytes), or one line why not.
std::string read_part(const std::string& folder, std::int64_t step, int stage, int num_stages,
                      std::map<std::string, std::vector<char>>* contents) {
  const std::string manifest_path = folder + "/" + stage_name(stage) + ".manifest";
  if (!fs::exists(manifest_path))
    return "stage " + std::to_string(stage) + " has no manifest (its writer has not finished, or stopped)";
  Manifest m;
  std::string why = parse_manifest(read_whole_file(manifest_path), m);
  if (!why.empty()) return manifest_path + " " + why;
  if (m.step != step || m.stage != stage)
    return manifest_path + " says step " + std::to_string(m.step) + " stage " + std::to_string(m.stage) +
           " (was the folder copied or renamed?)";
  if (m.num_stages != num_stages)
    return manifest_path + " was written by a job of " + std::to_string(m.num_stages) + " stage(s), this one has " +
           std::to_string(num_stages) + " (resume with the same pipeline layout)";
  for (const auto& f : m.files) {
    const std::string path = folder + "/" + f.name;
    if (!fs::exists(path)) return path + " is missing";
    std::vector<char> bytes = read_whole_file(path);
    if (bytes.size() != f.size)
      return path + " is truncated or overwritten (" + std::to_string(bytes.size()) + " bytes, the manifest says " +
             std::to_string(f.size) + ")";
    const std::uint32_t actual = crc32(bytes.data(), bytes.size());
    if (actual != f.crc)
      return path + " is corrupt: crc32 " + crc32_hex(actual) + ", the manifest says " + crc32_hex(f.crc);
    if (contents) (*contents)[f.name] = std::move(bytes);
  }
  return "";
}

template <typename T>
c10::Dict<std::string, T> to_dict(const std::map<std::string, T>& values) {
  c10::Dict<std::string, T> dict;
  for (const auto& [key, value] : values) dict.insert(key, value);
  return dict;
}

// CPU copies of GPU tensors: the files then load on any machine, the way
// torch.save(model.state_dict()) of a CPU model does.
c10::Dict<std::string, at::Tensor> to_tensor_dict(const std::map<std::string, at::Tensor>& values) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [key, value] : values) dict.insert(key, value.detach().to(at::kCPU));
  return dict;
}

c10::impl::GenericDict entry(const c10::impl::GenericDict& dict, const std::string& key, const std::string& path) {
  auto it = dict.find(key);
  if (it == dict.end() || !it->value().isGenericDict())
    throw CheckpointError("checkpoint: " + path + " has no '" + key + "' table (not a DistLab state file?)");
  return it->value().toGenericDict();
}

// A table of the file: string keys, each value of the kind `is` accepts.
template <typename Is>
c10::impl::GenericDict table(const c10::IValue& value, const std::string& path, const std::string& what, Is is) {
  const auto bad = [&] {
    return CheckpointError("checkpoint: " + path + " passes its checksum but its " + what +
                           " is not a table of that kind (not a DistLab checkpoint file?)");
  };
  if (!value.isGenericDict()) throw bad();
  c10::impl::GenericDict dict = value.toGenericDict();
  for (const auto& item : dict)
    if (!item.key().isString() || !is(item.value())) throw bad();
  return dict;
}

c10::IValue unpickle(const std::vector<char>& bytes, const std::string& path) {
  // LibTorch's unpickler trusts the lengths a pickle claims: checked first (the walk throws nothing).
  if (const std::string why = pickle_problem(bytes); !why.empty())
    throw CheckpointError("checkpoint: " + path + " passes its checksum but is not a torch.save file DistLab reads: " + why);
  try {
    return torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    std::string why = e.what();
    throw CheckpointError("checkpoint: " + path + " passes its checksum but cannot be read as a torch.save file: " +
                          why.substr(0, why.find('\n')));
  }
}

}  // namespace

Checkpointer::Checkpointer(std::string dir, int num_stages, int keep_last)
    : dir_(std::move(dir)), num_stages_(num_stages), keep_last_(keep_last) {
  if (num_stages_ < 1) throw CheckpointError("checkpoint: num_stages must be 1 or more, got " + std::to_string(num_stages_));
  if (keep_last_ < 1) throw CheckpointError("checkpoint: keep_last must be 1 or more, got " + std::to_string(keep_last_));
  std::error_code error;
  fs::create_directories(dir_, error);
  if (error) throw CheckpointError("checkpoint: cannot create " + dir_ + ": " + error.message());
}

std::string Checkpointer::folder(std::int64_t step) const {
  char name[32];
  std::snprintf(name, sizeof name, "%s%09lld", kFolderPrefix, static_cast<long long>(step));
  return dir_ + "/" + name;
}
std::string Checkpointer::model_file(std::int64_t step, int stage) const {
  return folder(step) + "/" + stage_name(stage) + ".model.pt";
}
std::string Checkpointer::state_file(std::int64_t step, int stage) const {
  return folder(step) + "/" + stage_name(stage) + ".state.pt";
}
std::string Checkpointer::manifest_file(std::int64_t step, int stage) const {
  return folder(step) + "/" + stage_name(stage) + ".manifest";
}

std::string Checkpointer::save(std::int64_t step, int stage, const CheckpointPart& part) const {
  if (stage < 0 || stage >= num_stages_)
    throw CheckpointError("checkpoint: stage " + std::to_string(stage) + " is not in 0.." +
                          std::to_string(num_stages_ - 1) + "; give the Checkpointer the job's stage count");
  const std::string where = folder(step);
  std::error_code error;
  fs::create_directories(where, error);
  if (error) throw CheckpointError("checkpoint: cannot create " + where + ": " + error.message());
  sync_folder(dir_);
  // A rerun of this step after a crash: drop what the crashed writer of
  // this stage left, the manifest first, so that while the files are
  // replaced the part reads as unfinished, not as corrupt.
  fs::remove(manifest_file(step, stage), error);
  for (const auto& item : fs::directory_iterator(where)) {
    const std::string name = item.path().filename().string();
    if (name.rfind(stage_name(stage) + ".", 0) == 0 && is_temporary_file(name)) fs::remove(item.path(), error);
  }

  c10::impl::GenericDict state(c10::StringType::get(), c10::AnyType::get());
  state.insert("tensors", to_tensor_dict(part.tensors));
  state.insert("ints", to_dict(part.ints));
  state.insert("reals", to_dict(part.reals));
  state.insert("texts", to_dict(part.texts));
  const std::vector<std::pair<std::string, std::vector<char>>> files = {
      {stage_name(stage) + ".model.pt", torch::jit::pickle_save(to_tensor_dict(part.model))},
      {stage_name(stage) + ".state.pt", torch::jit::pickle_save(state)}};

  Manifest manifest{step, stage, num_stages_, {}};
  try {
    for (const auto& [name, bytes] : files) {
      write_file_atomically(where + "/" + name, bytes);
      manifest.files.push_back({name, bytes.size(), crc32(bytes.data(), bytes.size())});
    }
    const std::string text = manifest_text(manifest);
    write_file_atomically(manifest_file(step, stage), std::vector<char>(text.begin(), text.end()));
  } catch (const std::runtime_error& e) {
    throw CheckpointError(e.what());
  }
  if (stage == 0) prune();
  return where;
}

std::vector<std::int64_t> Checkpointer::steps() const {
  std::vector<std::int64_t> found;
  std::error_code error;
  for (const auto& item : fs::directory_iterator(dir_, error)) {
    const std::string name = item.path().filename().string();
    if (!item.is_directory() || name.rfind(kFolderPrefix, 0) != 0) continue;
    const std::string digits = name.substr(std::string(kFolderPrefix).size());
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    found.push_back(std::stoll(digits));
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

std::optional<int> Checkpointer::stages_of(std::int64_t step) const {
  const std::string path = manifest_file(step, 0);
  if (!fs::exists(path)) return std::nullopt;
  Manifest m;
  if (!parse_manifest(read_whole_file(path), m).empty() || m.stage != 0 || m.num_stages < 1) return std::nullopt;
  return m.num_stages;
}

int Checkpointer::stage_count_of(std::int64_t step) const {
  return any_stage_count_ ? stages_of(step).value_or(num_stages_) : num_stages_;
}

std::string Checkpointer::problem(std::int64_t step) const {
  const int stages = stage_count_of(step);
  for (int stage = 0; stage < stages; ++stage) {
    std::string why = read_part(folder(step), step, stage, stages, nullptr);
    if (!why.empty()) return why;
  }
  return "";
}

std::optional<std::int64_t> Checkpointer::latest_complete(const Report& report) const {
  for (std::int64_t step : steps()) {
    const std::string why = problem(step);
    if (why.empty()) return step;
    if (report) report("checkpoint: skipping " + folder(step) + ": " + why);
  }
  return std::nullopt;
}

CheckpointPart Checkpointer::load(std::int64_t step, int stage) const {
  std::map<std::string, std::vector<char>> contents;
  const std::string why = read_part(folder(step), step, stage, stage_count_of(step), &contents);
  if (!why.empty()) throw CheckpointError("checkpoint: cannot load " + folder(step) + ": " + why);
  CheckpointPart part;
  const std::string model_path = model_file(step, stage), state_path = state_file(step, stage);
  const std::string model_name = stage_name(stage) + ".model.pt", state_name = stage_name(stage) + ".state.pt";
  if (!contents.count(model_name) || !contents.count(state_name))
    throw CheckpointError("checkpoint: " + manifest_file(step, stage) + " does not list " + model_name + " and " +
                          state_name);
  const auto is_tensor = [](const c10::IValue& v) { return v.isTensor(); };
  for (const auto& item : table(unpickle(contents[model_name], model_path), model_path, "model", is_tensor))
    part.model[item.key().toStringRef()] = item.value().toTensor();
  const auto state = table(unpickle(contents[state_name], state_path), state_path, "state", [](const c10::IValue&) { return true; });
  const auto section = [&](const char* key, auto is) { return table(entry(state, key, state_path), state_path, key, is); };
  for (const auto& item : section("tensors", is_tensor)) part.tensors[item.key().toStringRef()] = item.value().toTensor();
  for (const auto& item : section("ints", [](const c10::IValue& v) { return v.isInt(); }))
    part.ints[item.key().toStringRef()] = item.value().toInt();
  for (const auto& item : section("reals", [](const c10::IValue& v) { return v.isDouble(); }))
    part.reals[item.key().toStringRef()] = item.value().toDouble();
  for (const auto& item : section("texts", [](const c10::IValue& v) { return v.isString(); }))
    part.texts[item.key().toStringRef()] = item.value().toStringRef();
  return part;
}

void Checkpointer::prune() const {
  int complete = 0;
  for (std::int64_t step : steps()) {
    if (complete < keep_last_) {
      if (problem(step).empty()) ++complete;
      continue;
    }
    std::error_code error;
    fs::remove_all(folder(step), error);  // best effort: a folder left over is pruned next time
  }
}

}  // namespace distlab::checkpoint
