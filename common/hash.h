// xxhash helpers: the one place Granary names its hash functions.
//
// Fingerprints, payload checksums and digests use XXH64 (stable across versions and machines).
#ifndef GRANARY_COMMON_HASH_H_
#define GRANARY_COMMON_HASH_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

namespace granary {

// XXH64 of `data` with `seed`.
uint64_t Hash64(absl::string_view data, uint64_t seed = 0);

// Deterministically mixes two 64-bit values into one (order matters).
uint64_t HashCombine(uint64_t a, uint64_t b);

// Lower-case, zero-padded 16-digit hex of `value`.
std::string HashToHex(uint64_t value);

// Incremental XXH64 over a sequence of byte strings. Thread-compatible.
class StreamingHash64 {
 public:
  explicit StreamingHash64(uint64_t seed = 0);
  ~StreamingHash64();
  StreamingHash64(const StreamingHash64&) = delete;
  StreamingHash64& operator=(const StreamingHash64&) = delete;

  void Update(absl::string_view data);
  void UpdateU64(uint64_t value);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH64_state_t*, kept opaque so xxhash.h stays out of this header.
};

}  // namespace granary

#endif  // GRANARY_COMMON_HASH_H_
