#include "common/stateless_random.h"

#include "common/hash.h"

namespace granary {

uint64_t RandomKey(uint64_t seed, uint64_t epoch, uint64_t element_key, uint64_t op_index) {
  return HashCombine(HashCombine(seed, epoch), HashCombine(element_key, op_index));
}

uint64_t StatelessRandom::Next() {
  uint64_t z = key_ + (++counter_) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t StatelessRandom::Uniform(uint64_t n) {
  // Rejection sampling keeps the result unbiased for any n.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = Next();
  } while (x >= limit);
  return x % n;
}

double StatelessRandom::UniformDouble() { return (Next() >> 11) * 0x1.0p-53; }

}  // namespace granary
