// The reader's one-line errors: a missing folder, a missing split, an empty
// file, a file that is not UTF-8 (named, with the byte offset), and a folder
// that reads back line by line.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "data/corpus.hpp"
#include "data/errors.hpp"
#include "data/wikitext.hpp"
#include "reference.hpp"

namespace distlab::data {
namespace {

std::string make_folder(const std::string& name) {
  const std::string dir = testing_ref::temp_path(name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// The message of the DataError that `f` throws; fails the test if none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no DataError";
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void write_good_splits(const std::string& dir) {
  write(dir + "/wiki.train.tokens", " \n = Title = \n \n the cat sat on the mat . \n the end \n");
  write(dir + "/wiki.valid.tokens", " \n the dog sat . \n");
  write(dir + "/wiki.test.tokens", " the cat \r\n");
}

TEST(WikiText, ReadsAFolder) {
  const std::string dir = make_folder("good");
  write_good_splits(dir);
  const WikiTextLines lines = read_wikitext(dir);
  EXPECT_EQ(lines.train, (std::vector<std::string>{" ", " = Title = ", " ", " the cat sat on the mat . ", " the end "}));
  EXPECT_EQ(lines.test, (std::vector<std::string>{" the cat "}));

  // Vocabulary from train only: the 3, cat ... ; "dog" in valid becomes <unk>.
  const Corpus corpus = build_corpus(lines);
  EXPECT_EQ(corpus.vocab.itos().at(1), "the");
  EXPECT_EQ(corpus.train.numel(), 12);
  const at::Tensor valid = corpus.valid;
  ASSERT_EQ(valid.numel(), 4);
  EXPECT_EQ(valid[0].item<int64_t>(), corpus.vocab.index("the"));
  EXPECT_EQ(valid[1].item<int64_t>(), 0);
}

TEST(WikiText, MissingFolder) {
  const std::string message = error_of([] { read_wikitext("/nonexistent/distlab/corpus"); });
  EXPECT_TRUE(contains(message, "'/nonexistent/distlab/corpus' does not exist")) << message;
  EXPECT_FALSE(contains(message, "\n")) << message;
}

TEST(WikiText, MissingSplit) {
  const std::string dir = make_folder("missing_split");
  write_good_splits(dir);
  std::remove((dir + "/wiki.valid.tokens").c_str());
  const std::string message = error_of([&] { read_wikitext(dir); });
  EXPECT_TRUE(contains(message, dir + "/wiki.valid.tokens' is missing")) << message;
  EXPECT_FALSE(contains(message, "\n")) << message;
}

TEST(WikiText, EmptyFile) {
  const std::string dir = make_folder("empty");
  write_good_splits(dir);
  write(dir + "/wiki.test.tokens", "");
  std::string message = error_of([&] { read_wikitext(dir); });
  EXPECT_TRUE(contains(message, dir + "/wiki.test.tokens' is empty")) << message;
  // Blank lines only: no tokens either.
  write(dir + "/wiki.test.tokens", " \n \n");
  message = error_of([&] { read_wikitext(dir); });
  EXPECT_TRUE(contains(message, "wiki.test.tokens' is empty")) << message;
  // Only characters the tokenizer drops: caught after tokenizing.
  write(dir + "/wiki.test.tokens", " \" ; : \n");
  message = error_of([&] { load_corpus(dir); });
  EXPECT_TRUE(contains(message, "wiki.test.tokens' has no tokens")) << message;
  EXPECT_FALSE(contains(message, "\n")) << message;
}

TEST(WikiText, NotUtf8) {
  const std::string dir = make_folder("latin1");
  write_good_splits(dir);
  // "caf\xE9" is Latin-1: line 1 is 11 bytes, so the bad byte is at 11 + 8 = 19.
  write(dir + "/wiki.train.tokens", " the cafe \n the caf\xE9 . \n");
  const std::string message = error_of([&] { read_wikitext(dir); });
  EXPECT_TRUE(contains(message, dir + "/wiki.train.tokens' is not UTF-8")) << message;
  EXPECT_TRUE(contains(message, "invalid byte 0xE9 at byte offset 19 (line 2)")) << message;
  EXPECT_FALSE(contains(message, "\n")) << message;
}

TEST(WikiText, FolderIsAFile) {
  const std::string path = testing_ref::temp_path("a_file");
  write(path, "x");
  EXPECT_TRUE(contains(error_of([&] { read_wikitext(path); }), "is not a folder"));
}

}  // namespace
}  // namespace distlab::data
