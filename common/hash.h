// xxhash helpers: the one place Granary names its hash functions.
//
// Fingerprints and digests use XXH64; element checksums on the data plane use XXH3-64
// (transport/FORMAT.md), several times faster on large inputs. Both are stable across versions
// and machines.
#ifndef GRANARY_COMMON_HASH_H_
#define GRANARY_COMMON_HASH_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

namespace granary {

// XXH64 of `data` with `seed`.
uint64_t Hash64(absl::string_view data, uint64_t seed = 0);

// XXH3-64 of `data` (seed 0).
uint64_t Hash3_64(absl::string_view data);

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

  // Starts over, as if newly constructed with `seed`.
  void Reset(uint64_t seed = 0);
  void Update(absl::string_view data);
  void UpdateU64(uint64_t value);
  uint64_t Digest() const;

 private:
  void* state_;  // XXH64_state_t*, kept opaque so xxhash.h stays out of this header.
};

// Incremental XXH3-64 over a sequence of byte strings: the same value as Hash3_64 of their
// concatenation. Thread-compatible.
class StreamingHash3 {
 public:
  StreamingHash3();
  ~StreamingHash3();
  StreamingHash3(const StreamingHash3&) = delete;
  StreamingHash3& operator=(const StreamingHash3&) = delete;

  void Update(const void* data, size_t size);
  void Update(absl::string_view data) { Update(data.data(), data.size()); }
  uint64_t Digest() const;

 private:
  void* state_;  // XXH3_state_t*.
};

}  // namespace granary

#endif  // GRANARY_COMMON_HASH_H_
