// What the tests that hold DistLab against PyTorch in Python share:
// Debian's python3 with python3-torch, tensors and dicts handed over as
// torch.save-compatible pickles (torch::pickle_save / torch.load and back),
// and the script run with its output kept for the failure message.
#pragma once

#include <torch/serialize.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace distlab::test_support {

inline constexpr const char* kPython = "/usr/bin/python3";

inline bool have_python_torch() {
  return std::filesystem::exists(kPython) &&
         std::system((std::string(kPython) + " -c 'import torch' > /dev/null 2>&1").c_str()) == 0;
}

// Why a test that needs it cannot run when have_python_torch() is false.
inline std::string no_python_torch() {
  return std::string(kPython) + " with torch is missing (hint: apt-get install python3-torch)";
}

inline void save_pickle(const std::filesystem::path& path, const c10::IValue& value) {
  const std::vector<char> bytes = torch::pickle_save(value);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline c10::IValue load_pickle(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return torch::pickle_load(bytes);
}

struct PythonRun {
  int status = -1;
  std::string log;  // stdout and stderr
};

// `python3 SCRIPT ARGS` with its output in `log_path`.
inline PythonRun run_python(const std::string& script_and_args, const std::filesystem::path& log_path) {
  PythonRun run;
  run.status = std::system((std::string(kPython) + " " + script_and_args + " > " + log_path.string() + " 2>&1").c_str());
  std::ifstream log(log_path);
  std::stringstream text;
  text << log.rdbuf();
  run.log = text.str();
  return run;
}

}  // namespace distlab::test_support
