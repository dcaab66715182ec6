// Counts in words, for what the programs print: "1 rank", "4 ranks",
// "1 batch", "3 batches", "2 thread ranks", "1,234,567".
#pragma once

#include <string>

namespace distlab::comm {

// `n` and the noun, `singular` when n is 1, else `plural` (the singular and
// an "s" unless given: "batch", "batches").
inline std::string counted(long long n, const std::string& singular, const std::string& plural = "") {
  return std::to_string(n) + " " + (n == 1 ? singular : plural.empty() ? singular + "s" : plural);
}

// 1234567 -> "1,234,567"
inline std::string grouped(long long n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// "4 thread ranks", "1 gloo rank": the backend's name as an adjective.
inline std::string backend_ranks(long long n, const std::string& backend) {
  return counted(n, (backend == "threads" ? std::string("thread") : backend) + " rank");
}

}  // namespace distlab::comm
