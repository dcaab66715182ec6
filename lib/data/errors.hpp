// Errors of the data layer: a missing folder or split, an empty or
// non-UTF-8 file, a batch request outside the data. Each message is one line
// that names the file (and byte offset where it applies) and a hint of the fix.
#pragma once

#include <stdexcept>

namespace distlab::data {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace distlab::data
