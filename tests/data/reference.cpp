#include "reference.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace distlab::data::testing_ref {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "distlab_data_" + std::to_string(::getpid()) + "_" + name;
}

namespace {

constexpr const char* kPython = "/usr/bin/python3";
const std::string kScript = std::string(DISTLAB_SOURCE_DIR) + "/tests/data/torchtext_reference.py";

// The command's stdout (the JSON); its stderr, a traceback, goes into the
// exception that a failure throws, so the failing test shows why.
std::string run(const std::string& command) {
  const std::string errors = temp_path("stderr");
  FILE* pipe = ::popen((command + " 2> '" + errors + "'").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run: " + command);
  std::string out;
  char buffer[65536];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = ::pclose(pipe);
  std::ifstream in(errors);
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(errors.c_str());
  if (status != 0)
    throw std::runtime_error("the torchtext reference failed (status " + std::to_string(status) + "): " + command +
                             "\n" + log);
  return out;
}

}  // namespace

std::optional<std::string> torchtext_unavailable() {
  if (::access(kPython, X_OK) != 0) return std::string(kPython) + " is missing";
  if (std::system((std::string(kPython) + " -c 'import importlib.util,sys; "
                   "sys.exit(importlib.util.find_spec(\"torchtext\") is None)' 2>/dev/null")
                      .c_str()) != 0) {
    return "python3-torchtext is not installed (scripts/setup.sh installs it)";
  }
  return std::nullopt;
}

nlohmann::json run_torchtext(const std::string& mode, const std::vector<std::string>& lines) {
  const std::string input = temp_path(mode + "_lines.json");
  {
    std::ofstream out(input, std::ios::binary);
    out << nlohmann::json(lines).dump();
  }
  const std::string text = run(std::string(kPython) + " " + kScript + " " + mode + " '" + input + "'");
  std::remove(input.c_str());
  return nlohmann::json::parse(text);
}

nlohmann::json run_torchtext_on_corpus(const std::string& folder) {
  return nlohmann::json::parse(run(std::string(kPython) + " " + kScript + " corpus '" + folder + "'"));
}

}  // namespace distlab::data::testing_ref
