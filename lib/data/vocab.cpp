#include "data/vocab.hpp"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "data/errors.hpp"

namespace distlab::data {

void TokenCounter::add(const std::vector<std::string>& tokens) {
  for (const std::string& t : tokens) ++counts_[t];
  total_ += static_cast<int64_t>(tokens.size());
}

Vocab Vocab::build(const TokenCounter& counter, const std::vector<std::string>& specials,
                   int64_t min_freq) {
  std::vector<std::pair<std::string, int64_t>> sorted(counter.counts().begin(), counter.counts().end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  const std::unordered_set<std::string> special_set(specials.begin(), specials.end());
  std::vector<std::string> itos = specials;
  for (auto& [token, count] : sorted) {
    if (count >= min_freq && special_set.count(token) == 0) itos.push_back(std::move(token));
  }
  return Vocab(std::move(itos));
}

Vocab Vocab::build_with_unk(const TokenCounter& counter) {
  Vocab vocab = build(counter, {kUnkToken});
  vocab.set_default_index(vocab.index(kUnkToken));
  return vocab;
}

Vocab::Vocab(std::vector<std::string> itos) : itos_(std::move(itos)) {
  stoi_.reserve(itos_.size());
  for (std::size_t i = 0; i < itos_.size(); ++i) {
    if (!stoi_.emplace(itos_[i], static_cast<int64_t>(i)).second) {
      throw DataError("vocabulary: token '" + itos_[i] + "' appears twice (at " +
                      std::to_string(stoi_[itos_[i]]) + " and " + std::to_string(i) +
                      "); a special token given twice?");
    }
  }
}

const std::string& Vocab::token(int64_t index) const {
  if (index < 0 || index >= size()) {
    throw DataError("vocabulary: index " + std::to_string(index) + " is outside [0, " +
                    std::to_string(size()) + ")");
  }
  return itos_[static_cast<std::size_t>(index)];
}

int64_t Vocab::index(const std::string& token) const {
  const auto it = stoi_.find(token);
  if (it != stoi_.end()) return it->second;
  if (default_index_) return *default_index_;
  throw DataError("vocabulary: token '" + token +
                  "' is not in the vocabulary and no default index is set (hint: set_default_index)");
}

std::vector<int64_t> Vocab::indices(const std::vector<std::string>& tokens) const {
  std::vector<int64_t> out;
  out.reserve(tokens.size());
  for (const std::string& t : tokens) out.push_back(index(t));
  return out;
}

void Vocab::set_default_index(int64_t index) {
  token(index);  // range check
  default_index_ = index;
}

}  // namespace distlab::data
