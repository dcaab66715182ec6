#include "comm/error_file.hpp"

#include <cxxabi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <typeinfo>

namespace distlab::comm {

std::string exception_type_name(const std::exception& error) {
  const char* mangled = typeid(error).name();
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(mangled);
}

std::string torchelastic_error_json(const std::string& type_name, const std::string& message,
                                    const std::string& program, std::int64_t unix_seconds) {
  // Python writes "Type: text"; the stack line says where a C++ program was.
  const std::string headline = type_name + ": " + message;
  const std::string callstack = headline + "\n(C++ exception in " + (program.empty() ? "the program" : program) +
                                "; no Python stack)";
  nlohmann::json data = {{"message",
                          {{"message", headline},
                           {"extraInfo", {{"py_callstack", callstack}, {"timestamp", std::to_string(unix_seconds)}}}}}};
  // Invalid UTF-8 in an exception text must not throw here.
  return data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string record_error(const std::exception& error, const std::string& program, const Environment& env) {
  auto it = env.find("TORCHELASTIC_ERROR_FILE");
  if (it == env.end() || it->second.empty()) return "";
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now().time_since_epoch());
  const std::string text = torchelastic_error_json(exception_type_name(error), error.what(), program, now.count());
  std::ofstream out(it->second, std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::fprintf(stderr, "cannot write TORCHELASTIC_ERROR_FILE=%s; the error was: %s\n", it->second.c_str(),
                 error.what());
    return "";
  }
  return it->second;
}

}  // namespace distlab::comm
