// How errors describe a message: "8 Float elements". One wording for every
// backend that checks a recv against what was sent.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>

namespace distlab::comm {

// The dtype a peer's word names, if tensors are made of it: a known
// ScalarType, not Undefined, not quantized, whole bytes per element
// (LibTorch's sub-byte types have no element size). Never throws: one rule
// for every reader of a peer's header (gloo_p2p.hpp, shaped_p2p.hpp).
inline std::optional<c10::ScalarType> tensor_dtype(int64_t word) {
  if (word < 0 || word >= static_cast<int64_t>(c10::ScalarType::NumOptions)) return std::nullopt;
  const auto type = static_cast<c10::ScalarType>(word);
  if (type == c10::ScalarType::Undefined || c10::isQIntType(type)) return std::nullopt;
  try {
    (void)c10::elementSize(type);
  } catch (const c10::Error&) {
    return std::nullopt;
  }
  return type;
}

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
