// Checksums of checkpoint files, so that load_state refuses a damaged file by name instead of
// loading whatever its bytes now say (a flipped bit in tensor data loads silently otherwise:
// LibTorch's zip reader does not check the CRC-32 its records carry).
//
// CRC-32C (Castagnoli), not SHA-256: what it must catch is accidental damage (a torn or
// truncated write, a bad disk or copy), which a 32-bit CRC always catches for bursts up to 32
// bits and otherwise misses with probability 2^-32; the byte count beside it catches every
// truncation. Against deliberate tampering a checksum kept in the same directory protects
// nothing, however strong; a cryptographic hash would only add a dependency and cost several
// times the time, where CRC-32C runs at memory speed with SSE4.2's crc32 instruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace accelerate::detail {

/// CRC-32C of `size` bytes at `data`, continuing from `crc` (the CRC of the bytes before; 0 to
/// start). crc32c(0, "123456789", 9) is 0xE3069283.
uint32_t crc32c(uint32_t crc, const void *data, size_t size);

struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
  bool operator==(const FileDigest &other) const {
    return bytes == other.bytes && crc32c == other.crc32c;
  }
};

/// The size and CRC-32C of the file at `path`; throws std::runtime_error naming it when it
/// cannot be read.
FileDigest digest_file(const std::filesystem::path &path);

} // namespace accelerate::detail
