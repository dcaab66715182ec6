// The vocabulary, built as torchtext's build_vocab_from_iterator builds it
// (torchtext/vocab/vocab_factory.py):
//
//   1. count every token of every line;
//   2. sort by descending count, ties by the token itself (Python compares
//      str by code point; UTF-8 bytes compare in the same order);
//   3. drop tokens seen fewer than min_freq times;
//   4. remove the specials from that list (WikiText's text contains "<unk>"
//      itself) and put them first, in the order given.
//
// The tutorial then sets the default index to "<unk>"'s, so an unknown token
// maps to 0 instead of being an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace distlab::data {

inline constexpr const char* kUnkToken = "<unk>";

class TokenCounter {
 public:
  void add(const std::vector<std::string>& tokens);
  const std::unordered_map<std::string, int64_t>& counts() const { return counts_; }
  int64_t total() const { return total_; }

 private:
  std::unordered_map<std::string, int64_t> counts_;
  int64_t total_ = 0;
};

class Vocab {
 public:
  // build_vocab_from_iterator(iterator, min_freq, specials, special_first=True).
  static Vocab build(const TokenCounter& counter, const std::vector<std::string>& specials,
                     int64_t min_freq = 1);
  // The tutorial's vocabulary: specials ["<unk>"], default index that of "<unk>".
  static Vocab build_with_unk(const TokenCounter& counter);

  Vocab() = default;
  explicit Vocab(std::vector<std::string> itos);

  int64_t size() const { return static_cast<int64_t>(itos_.size()); }
  const std::vector<std::string>& itos() const { return itos_; }
  const std::string& token(int64_t index) const;
  bool contains(const std::string& token) const { return stoi_.count(token) != 0; }

  // The index of `token`; the default index if it is unknown, or a DataError
  // when no default is set (as torchtext raises).
  int64_t index(const std::string& token) const;
  std::vector<int64_t> indices(const std::vector<std::string>& tokens) const;

  void set_default_index(int64_t index);
  std::optional<int64_t> default_index() const { return default_index_; }

 private:
  std::vector<std::string> itos_;
  std::unordered_map<std::string, int64_t> stoi_;
  std::optional<int64_t> default_index_;
};

}  // namespace distlab::data
