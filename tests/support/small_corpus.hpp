// A corpus for the tests that train the capstone's language model: 3,500
// lines of 12 words drawn by Zipf's law from kSmallCorpusWords words (w0,
// w1, ...), the same lines on every call. The equalities those tests check
// hold on any text; a small vocabulary keeps the decoder small (on
// datasets/austen's 6,949 words it is most of each step's work).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace distlab::test_support {

constexpr int kSmallCorpusWords = 300;

struct SmallCorpusText {
  std::vector<std::string> train, valid, test;  // lines
};

inline SmallCorpusText small_corpus_text() {
  std::mt19937 random(2024);
  std::vector<double> weights;
  for (int k = 0; k < kSmallCorpusWords; ++k) weights.push_back(1.0 / (k + 1));
  std::discrete_distribution<int> word(weights.begin(), weights.end());
  const auto lines = [&](int count) {
    std::vector<std::string> text;
    for (int i = 0; i < count; ++i) {
      std::string line;
      for (int k = 0; k < 12; ++k) line += " w" + std::to_string(word(random));
      text.push_back(line);
    }
    return text;
  };
  SmallCorpusText text;
  text.train = lines(2500);
  text.valid = lines(500);
  text.test = lines(500);
  return text;
}

// The same lines in WikiText-2's layout (wiki.train.tokens, ...), written
// once per test process into a folder of its own: a program's --data.
inline const std::string& small_corpus_folder() {
  static const std::string folder = [] {
    const std::string dir = ::testing::TempDir() + "distlab_small_corpus_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    const SmallCorpusText text = small_corpus_text();
    for (const auto& [split, lines] : {std::pair<std::string, const std::vector<std::string>*>{"train", &text.train},
                                       {"valid", &text.valid},
                                       {"test", &text.test}}) {
      std::ofstream out(dir + "/wiki." + split + ".tokens");
      for (const auto& line : *lines) out << line << " \n";
    }
    return dir;
  }();
  return folder;
}

}  // namespace distlab::test_support
