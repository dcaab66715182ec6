// CRC-32 (the one of zip, gzip and Python's zlib.crc32: reflected
// polynomial 0xEDB88320, initial value and final xor 0xFFFFFFFF), the
// checksum of every checkpoint file. It catches truncation and flipped bits,
// not tampering. No LibTorch here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace distlab::checkpoint {

// Table-driven, one byte per step. `crc` continues an earlier call:
// crc32(b, nb, crc32(a, na)) == crc32 of a followed by b.
std::uint32_t crc32(const void* data, std::size_t size, std::uint32_t crc = 0);

// The reference: bit by bit, straight from the polynomial.
std::uint32_t crc32_bitwise(const void* data, std::size_t size, std::uint32_t crc = 0);

// "0x1a2b3c4d"
std::string crc32_hex(std::uint32_t crc);

}  // namespace distlab::checkpoint
