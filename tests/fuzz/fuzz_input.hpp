// What every fuzz target shares: the input cut into pieces (several files
// from one input), and a private scratch folder for the readers that take
// paths. A target's LLVMFuzzerTestOneInput is called by libFuzzer
// (scripts/fuzz.sh) or, on the normal build, by replay_main.cpp once per
// corpus file; either way it must return for every input, and the only
// exceptions it lets out are the ones its reader does not document (each
// one a finding).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace distlab::fuzz {

// Pieces of a multi-file input are separated by this line; a dictionary
// (tests/fuzz/dict/) holds it, so the fuzzer adds and removes files.
inline constexpr std::string_view kSeparator = "\n--8<--\n";

inline std::vector<std::string> pieces(const uint8_t* data, size_t size, size_t max_pieces) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> out;
  size_t at = 0;
  while (out.size() + 1 < max_pieces) {
    const size_t cut = all.find(kSeparator, at);
    if (cut == std::string_view::npos) break;
    out.emplace_back(all.substr(at, cut - at));
    at = cut + kSeparator.size();
  }
  out.emplace_back(all.substr(at));
  return out;
}

// The scratch folders made, removed when the process ends.
struct ScratchFolders {
  std::vector<std::string> made;
  ~ScratchFolders() {
    std::error_code ignored;
    for (const std::string& dir : made) std::filesystem::remove_all(dir, ignored);
  }
};

// A folder of this process's own, emptied at each call.
inline std::string scratch_folder(const std::string& name) {
  namespace fs = std::filesystem;
  static ScratchFolders folders;
  const fs::path dir = fs::temp_directory_path() / ("distlab-fuzz-" + name + "-" + std::to_string(::getpid()));
  std::error_code ignored;
  if (!fs::remove_all(dir, ignored)) folders.made.push_back(dir.string());
  fs::create_directories(dir);
  return dir.string();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

}  // namespace distlab::fuzz
