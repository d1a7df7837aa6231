#include "common/hash.h"

#include <xxhash.h>

#include "absl/strings/str_format.h"

namespace granary {

uint64_t Hash64(absl::string_view data, uint64_t seed) {
  return XXH64(data.data(), data.size(), seed);
}

uint64_t Hash3_64(absl::string_view data) { return XXH3_64bits(data.data(), data.size()); }

uint64_t HashCombine(uint64_t a, uint64_t b) {
  const uint64_t pair[2] = {a, b};
  return XXH64(pair, sizeof(pair), 0x9E3779B97F4A7C15ULL);
}

std::string HashToHex(uint64_t value) { return absl::StrFormat("%016x", value); }

StreamingHash64::StreamingHash64(uint64_t seed) : state_(XXH64_createState()) { Reset(seed); }

void StreamingHash64::Reset(uint64_t seed) {
  XXH64_reset(static_cast<XXH64_state_t*>(state_), seed);
}

StreamingHash64::~StreamingHash64() { XXH64_freeState(static_cast<XXH64_state_t*>(state_)); }

void StreamingHash64::Update(absl::string_view data) {
  XXH64_update(static_cast<XXH64_state_t*>(state_), data.data(), data.size());
}

void StreamingHash64::UpdateU64(uint64_t value) {
  XXH64_update(static_cast<XXH64_state_t*>(state_), &value, sizeof(value));
}

uint64_t StreamingHash64::Digest() const {
  return XXH64_digest(static_cast<XXH64_state_t*>(state_));
}

StreamingHash3::StreamingHash3() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

StreamingHash3::~StreamingHash3() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void StreamingHash3::Update(const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

uint64_t StreamingHash3::Digest() const {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_));
}

}  // namespace granary
