// Counter-based ("stateless") random numbers (DESIGN.md §2).
//
// A generator is a pure function of its key and the number of draws made so far, so the same
// element recomputed on any worker, after any restart, draws the same numbers. Keys are derived
// from (job seed, epoch, element provenance key, op index) with RandomKey().
#ifndef GRANARY_COMMON_STATELESS_RANDOM_H_
#define GRANARY_COMMON_STATELESS_RANDOM_H_

#include <cstdint>

namespace granary {

// Derives a generator key from the values that identify one random decision.
uint64_t RandomKey(uint64_t seed, uint64_t epoch, uint64_t element_key, uint64_t op_index);

// Thread-compatible. Cheap to copy; its whole state is (key, counter).
class StatelessRandom {
 public:
  explicit StatelessRandom(uint64_t key, uint64_t counter = 0) : key_(key), counter_(counter) {}

  // The next 64 uniformly distributed bits (SplitMix64 of key + counter).
  uint64_t Next();
  // Uniform in [0, n). REQUIRES: n > 0.
  uint64_t Uniform(uint64_t n);
  // Uniform in [0, 1).
  double UniformDouble();

  uint64_t counter() const { return counter_; }

 private:
  uint64_t key_;
  uint64_t counter_;
};

}  // namespace granary

#endif  // GRANARY_COMMON_STATELESS_RANDOM_H_
