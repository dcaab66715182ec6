// The header a checked gloo recv reads from its peer before the payload
// (comm/gloo_p2p.hpp): three int64 words (bytes, dtype, element count).
// judge_header must tell a header that fits the recv's tensor, one of
// another real tensor (whose bytes are then taken into a buffer of that
// size) and one no tensor has, and never throw. Checked here against the
// rule worked again in 128-bit arithmetic. Input: the three words, then a
// byte choosing the recv tensor's dtype and one its element count.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "comm/gloo_p2p.hpp"
#include "comm/message_text.hpp"

namespace {

void fail(const char* what) {
  std::fprintf(stderr, "gloo_header_fuzz: %s\n", what);
  std::abort();
}

// A header of some tensor, worked without judge_header's code.
bool some_tensor_has(const int64_t (&w)[3]) {
  const int64_t bytes = w[0], dtype = w[1], numel = w[2];
  if (dtype < 0 || dtype >= static_cast<int64_t>(c10::ScalarType::NumOptions) || numel < 0) return false;
  const auto type = static_cast<c10::ScalarType>(dtype);
  if (type == c10::ScalarType::Undefined || c10::isQIntType(type)) return false;
  __int128 size = 0;
  try {
    size = static_cast<__int128>(c10::elementSize(type));
  } catch (const c10::Error&) {
    return false;
  }
  return static_cast<__int128>(numel) * size == static_cast<__int128>(bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using distlab::comm::HeaderVerdict;
  uint8_t in[26] = {};
  std::memcpy(in, data, std::min(size, sizeof(in)));
  int64_t words[3];
  std::memcpy(words, in, sizeof(words));
  const at::ScalarType kinds[] = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong, at::kInt, at::kByte, at::kBool};
  const at::ScalarType kind = kinds[in[24] % (sizeof(kinds) / sizeof(kinds[0]))];
  const at::Tensor expected = at::empty({in[25] % 17}, at::TensorOptions().dtype(kind).device(at::kMeta));

  const HeaderVerdict verdict = distlab::comm::judge_header(words, expected);
  const bool fits = words[0] == expected.numel() * static_cast<int64_t>(expected.element_size()) &&
                    words[1] == static_cast<int64_t>(kind) && words[2] == expected.numel();
  if ((verdict == HeaderVerdict::kFits) != fits) fail("kFits for a header that is not the recv's, or not for one that is");
  if (!fits && (verdict == HeaderVerdict::kMisfit) != some_tensor_has(words))
    fail("kMisfit for a header no tensor has (its bytes would be allocated), or kMalformed for a real one");
  // The message a misfit gives is made for any words.
  const std::string text = distlab::comm::misfit_text("recv", 1, words[1], words[2], static_cast<int64_t>(kind),
                                                      expected.numel());
  if (text.empty()) fail("an empty message");
  return 0;
}
