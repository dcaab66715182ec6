// torchtext itself as the reference: runs tests/data/torchtext_reference.py
// under /usr/bin/python3 (Debian's python3-torchtext) and parses its JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace distlab::data::testing_ref {

// Why torchtext cannot be run here, or nullopt when it can.
std::optional<std::string> torchtext_unavailable();

// mode "tokenize" or "vocab" over `lines`.
nlohmann::json run_torchtext(const std::string& mode, const std::vector<std::string>& lines);
// The tutorial's vocabulary of a WikiText folder, token counts per split and
// the unigram baseline, all computed in Python.
nlohmann::json run_torchtext_on_corpus(const std::string& folder);

std::string temp_path(const std::string& name);

}  // namespace distlab::data::testing_ref
