#include "trace/switching_file_sink.hpp"

#include "trace/config.hpp"

namespace distlab::trace {

std::string with_label(const std::string& file, const std::string& label) {
  const auto slash = file.rfind('/'), dot = file.rfind('.');
  // A dot in a folder's name is not the file's extension.
  const bool has_extension = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  std::string path = file;
  path.insert(has_extension ? dot : path.size(), "." + label);
  return path;
}

SwitchingFileSink::SwitchingFileSink(std::string file) : file_(std::move(file)) {}

std::string SwitchingFileSink::open(const std::string& label, int rank, bool several_processes) {
  const std::string path = trace_file_for(with_label(file_, label), rank, several_processes);
  std::lock_guard<std::mutex> lock(mutex_);
  if (current_) current_->close();
  current_.reset();
  current_ = std::make_shared<ChromeJsonSink>(path);
  return current_->path();
}

void SwitchingFileSink::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (current_) current_->close();
  current_.reset();
}

void SwitchingFileSink::write(const Event& event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (current_) current_->write(event);
}

void SwitchingFileSink::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (current_) current_->flush();
}

}  // namespace distlab::trace
