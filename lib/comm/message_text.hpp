// How errors describe a message: "8 Float elements". One wording for every
// backend that checks a recv against what was sent.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

namespace distlab::comm {

inline std::string elements_text(int64_t dtype, int64_t numel) {
  const bool known = dtype >= 0 && dtype < static_cast<int64_t>(c10::ScalarType::NumOptions);
  return std::to_string(numel) + " " +
         (known ? std::string(c10::toString(static_cast<c10::ScalarType>(dtype))) : "unknown-type") + " elements";
}

// "<what>: rank 0 sent 8 Float elements but the recv expects 4 Float elements".
inline std::string misfit_text(const std::string& what, int peer, int64_t sent_dtype, int64_t sent_numel,
                               int64_t expected_dtype, int64_t expected_numel) {
  return what + ": rank " + std::to_string(peer) + " sent " + elements_text(sent_dtype, sent_numel) +
         " but the recv expects " + elements_text(expected_dtype, expected_numel);
}

}  // namespace distlab::comm
