// The pull parser (trace/json_pull.hpp) against nlohmann::json, whose
// grammar it promises to accept exactly: both accept the input or both
// refuse it, and a value both read is written alike (nlohmann/json's own
// fuzzers parse, dump, parse again and compare the dumps). The input is
// also read a few bytes at a time, so values cut across chunk ends.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "trace/json_pull.hpp"
#include "trace/reader.hpp"

namespace {

using distlab::trace::ByteSource;
using distlab::trace::JsonPull;
using distlab::trace::JsonScalar;
using distlab::trace::TraceFormatError;

void check(bool ok, const char* what, const std::string& detail) {
  if (ok) return;
  std::fprintf(stderr, "json_pull_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

// Walks the whole input; "" when accepted, else the parser's message.
std::string pull_all(ByteSource& source) {
  try {
    JsonPull json(source);
    json.skip_bom();
    json.skip_value();
    json.expect_end();
    return "";
  } catch (const TraceFormatError& e) {
    return e.what();
  }
}

size_t depth_of(const nlohmann::json& j) {
  size_t deepest = 0;
  if (j.is_structured())
    for (const auto& item : j) deepest = std::max(deepest, depth_of(item));
  return j.is_structured() ? deepest + 1 : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ByteSource whole(text);
  const std::string pulled = pull_all(whole);

  // The same bytes through a file read in 3-byte chunks.
  std::FILE* file = fmemopen(const_cast<char*>(text.data()), text.size(), "rb");
  if (file != nullptr) {
    ByteSource chunked(file, 3);
    const std::string pulled_in_chunks = pull_all(chunked);
    std::fclose(file);
    check(pulled.empty() == pulled_in_chunks.empty(), "whole and chunked disagree", pulled + " | " + pulled_in_chunks);
  }

  nlohmann::json dom;
  std::string refused;
  try {
    dom = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    refused = e.what();
  }
  check(pulled.empty() == refused.empty(), "the pull parser and nlohmann disagree",
        "pull: " + (pulled.empty() ? std::string("accepted") : pulled) +
            "; nlohmann: " + (refused.empty() ? std::string("accepted") : refused));
  if (!refused.empty() || depth_of(dom) >= JsonPull::kMaxKeptDepth) return 0;  // deeper is refused when kept

  // Kept whole: a container's text is nlohmann's dump, a string its value.
  ByteSource again(text);
  JsonPull json(again);
  json.skip_bom();
  JsonScalar value;
  json.read_scalar(value);
  if (dom.is_structured()) check(value.text == dom.dump(), "a container's text is not nlohmann's dump", value.text);
  if (dom.is_string()) check(value.text == dom.get<std::string>(), "a string read otherwise", value.text);
  if (dom.is_number_unsigned())
    check(value.kind == JsonScalar::Kind::kUnsigned && value.unsigned_value == dom.get<uint64_t>(),
          "an unsigned number read otherwise", text);
  return 0;
}
