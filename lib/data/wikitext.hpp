// Reading a corpus in WikiText-2's layout: a folder holding
//
//   wiki.train.tokens  wiki.valid.tokens  wiki.test.tokens
//
// UTF-8 text, one paragraph or " = Heading = " per line, tokens separated by
// spaces. The real WikiText-2 (datasets/fetch_wikitext2.sh) and the bundled
// corpus (datasets/austen) read the same way. Every problem is one line:
// a missing folder or split, an empty file, a file that is not UTF-8 (with
// the byte offset and line of the first bad byte).
#pragma once

#include <string>
#include <vector>

namespace distlab::data {

enum class Split { kTrain, kValid, kTest };

const char* split_name(Split split);       // "train", "valid", "test"
std::string split_file_name(Split split);  // "wiki.train.tokens", ...
std::string split_path(const std::string& folder, Split split);

// The whole file as UTF-8 bytes; throws DataError as described above.
std::string read_split_text(const std::string& folder, Split split);

// Lines as torchtext's WikiText2 iterator yields them (newlines removed;
// empty and blank lines kept: data_process drops them after tokenizing).
std::vector<std::string> split_lines(const std::string& text);

struct WikiTextLines {
  std::string folder;
  std::vector<std::string> train;
  std::vector<std::string> valid;
  std::vector<std::string> test;
  const std::vector<std::string>& lines(Split split) const;
};

WikiTextLines read_wikitext(const std::string& folder);

}  // namespace distlab::data
