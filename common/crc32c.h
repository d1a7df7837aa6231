// CRC-32C (Castagnoli), as used by TFRecord framing and Granary's own file formats.
// Uses the SSE4.2 crc32 instruction when the CPU has it, else a slice-by-8 table.
// (Debian 12 packages no C/C++ CRC-32C library, so Granary carries this one.)
#ifndef GRANARY_COMMON_CRC32C_H_
#define GRANARY_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include "absl/strings/string_view.h"

namespace granary::crc32c {

// CRC-32C of data[0, n) continuing from the CRC `init_crc` of preceding data.
uint32_t Extend(uint32_t init_crc, const char* data, size_t n);

inline uint32_t Value(absl::string_view data) { return Extend(0, data.data(), data.size()); }

// The masked form TFRecord (and leveldb) store: a CRC of data that itself holds CRCs is weak,
// so stored CRCs are rotated and offset.
inline uint32_t Mask(uint32_t crc) {
  constexpr uint32_t kMaskDelta = 0xa282ead8ul;
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

inline uint32_t Unmask(uint32_t masked) {
  constexpr uint32_t kMaskDelta = 0xa282ead8ul;
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace granary::crc32c

#endif  // GRANARY_COMMON_CRC32C_H_
