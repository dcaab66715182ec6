#include "data/wikitext.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "data/errors.hpp"
#include "data/utf8.hpp"

namespace distlab::data {
namespace {

constexpr const char* kHint = "(hint: --data DIR, a folder with wiki.{train,valid,test}.tokens such as "
                              "datasets/austen, or fetch WikiText-2 with datasets/fetch_wikitext2.sh)";

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool only_whitespace(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '\v';
  });
}

}  // namespace

const char* split_name(Split split) {
  switch (split) {
    case Split::kTrain: return "train";
    case Split::kValid: return "valid";
    case Split::kTest: return "test";
  }
  return "?";
}

std::string split_file_name(Split split) { return std::string("wiki.") + split_name(split) + ".tokens"; }

std::string split_path(const std::string& folder, Split split) {
  if (folder.empty() || folder.back() == '/') return folder + split_file_name(split);
  return folder + "/" + split_file_name(split);
}

std::string read_split_text(const std::string& folder, Split split) {
  if (!exists(folder)) throw DataError("dataset folder '" + folder + "' does not exist " + kHint);
  if (!is_directory(folder)) throw DataError("dataset folder '" + folder + "' is not a folder " + kHint);
  const std::string path = split_path(folder, split);
  if (!exists(path)) {
    throw DataError("dataset split '" + path + "' is missing: the " + split_name(split) +
                    " split must be in " + split_file_name(split) + " " + kHint);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("dataset split '" + path + "' cannot be opened: " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (text.empty() || only_whitespace(text)) {
    throw DataError("dataset split '" + path + "' is empty (" + std::to_string(text.size()) +
                    " bytes, no tokens): regenerate or re-download it");
  }
  if (const auto bad = first_invalid_utf8(text)) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(*bad), '\n');
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned char>(text[*bad]));
    throw DataError("dataset split '" + path + "' is not UTF-8: invalid byte " + byte + " at byte offset " +
                    std::to_string(*bad) + " (line " + std::to_string(line) +
                    "); convert it, e.g. iconv -f latin1 -t utf-8");
  }
  return text;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::size_t stop = end;
    if (stop > start && text[stop - 1] == '\r') --stop;  // CRLF files, as Python's universal newlines
    lines.emplace_back(text, start, stop - start);
    start = end + 1;
  }
  return lines;
}

const std::vector<std::string>& WikiTextLines::lines(Split split) const {
  switch (split) {
    case Split::kTrain: return train;
    case Split::kValid: return valid;
    case Split::kTest: return test;
  }
  return train;
}

WikiTextLines read_wikitext(const std::string& folder) {
  WikiTextLines out;
  out.folder = folder;
  out.train = split_lines(read_split_text(folder, Split::kTrain));
  out.valid = split_lines(read_split_text(folder, Split::kValid));
  out.test = split_lines(read_split_text(folder, Split::kTest));
  return out;
}

}  // namespace distlab::data
