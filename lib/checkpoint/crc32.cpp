#include "checkpoint/crc32.hpp"

#include <array>
#include <cstdio>

namespace distlab::checkpoint {
namespace {

constexpr std::uint32_t kPolynomial = 0xEDB88320u;

// table[b]: the CRC register after shifting byte b through eight steps.
std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t r = b;
    for (int bit = 0; bit < 8; ++bit) r = (r & 1u) ? (r >> 1) ^ kPolynomial : r >> 1;
    table[b] = r;
  }
  return table;
}

}  // namespace

std::uint32_t crc32(const void* data, std::size_t size, std::uint32_t crc) {
  static const std::array<std::uint32_t, 256> table = make_table();
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::uint32_t r = ~crc;
  for (std::size_t i = 0; i < size; ++i) r = table[(r ^ bytes[i]) & 0xFFu] ^ (r >> 8);
  return ~r;
}

std::uint32_t crc32_bitwise(const void* data, std::size_t size, std::uint32_t crc) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::uint32_t r = ~crc;
  for (std::size_t i = 0; i < size; ++i) {
    r ^= bytes[i];
    for (int bit = 0; bit < 8; ++bit) r = (r & 1u) ? (r >> 1) ^ kPolynomial : r >> 1;
  }
  return ~r;
}

std::string crc32_hex(std::uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", crc);
  return text;
}

}  // namespace distlab::checkpoint
