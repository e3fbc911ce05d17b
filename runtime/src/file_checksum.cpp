#include "file_checksum.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace accelerate::detail {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78; // Castagnoli's, bit-reversed

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 1) != 0 ? (crc >> 1) ^ kPolynomial : crc >> 1;
    }
    table[byte] = crc;
  }
  return table;
}

uint32_t update_bytewise(uint32_t crc, const unsigned char *data, size_t size) {
  static const auto table = make_table();
  for (size_t i = 0; i < size; ++i) {
    crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  }
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) uint32_t update_sse42(uint32_t crc, const unsigned char *data,
                                                        size_t size) {
  uint64_t wide = crc;
  for (; size >= 8; data += 8, size -= 8) {
    uint64_t word;
    std::memcpy(&word, data, sizeof(word));
    wide = __builtin_ia32_crc32di(wide, word);
  }
  auto narrow = static_cast<uint32_t>(wide);
  for (; size > 0; ++data, --size) {
    narrow = __builtin_ia32_crc32qi(narrow, *data);
  }
  return narrow;
}

bool has_sse42() {
  static const bool supported = __builtin_cpu_supports("sse4.2");
  return supported;
}
#endif

} // namespace

uint32_t crc32c(uint32_t crc, const void *data, size_t size) {
  const auto *bytes = static_cast<const unsigned char *>(data);
  crc = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (has_sse42()) {
    return ~update_sse42(crc, bytes, size);
  }
#endif
  return ~update_bytewise(crc, bytes, size);
}

FileDigest digest_file(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error(path.string() + " cannot be opened: " + std::strerror(errno));
  }
  FileDigest digest;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = static_cast<size_t>(in.gcount());
    digest.crc32c = crc32c(digest.crc32c, buffer.data(), got);
    digest.bytes += got;
  }
  if (in.bad()) {
    throw std::runtime_error(path.string() + " cannot be read");
  }
  return digest;
}

} // namespace accelerate::detail
