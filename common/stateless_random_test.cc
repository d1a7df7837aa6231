#include "common/stateless_random.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace granary {
namespace {

std::vector<uint64_t> Draws(StatelessRandom rng, int n) {
  std::vector<uint64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(rng.Next());
  return out;
}

TEST(StatelessRandomTest, SameKeyAndCounterGiveSameDraws) {
  for (uint64_t key : {0ULL, 1ULL, 0xdeadbeefULL, ~0ULL}) {
    EXPECT_EQ(Draws(StatelessRandom(key), 100), Draws(StatelessRandom(key), 100)) << "key " << key;
  }
}

TEST(StatelessRandomTest, ResumingAtACounterContinuesTheSequence) {
  const uint64_t key = 12345;
  StatelessRandom rng(key);
  for (int i = 0; i < 10; ++i) rng.Next();
  EXPECT_EQ(rng.counter(), 10u);
  // A generator rebuilt from (key, counter) draws what the original draws next.
  StatelessRandom resumed(key, rng.counter());
  EXPECT_EQ(Draws(resumed, 50), Draws(rng, 50));
  // And a copy is an independent generator in the same state.
  StatelessRandom copy = rng;
  EXPECT_EQ(copy.Next(), rng.Next());
}

TEST(StatelessRandomTest, DifferentKeysGiveDifferentDraws) {
  std::set<uint64_t> first_draws;
  for (uint64_t key = 0; key < 1000; ++key) {
    const std::vector<uint64_t> a = Draws(StatelessRandom(key), 20);
    const std::vector<uint64_t> b = Draws(StatelessRandom(key + 1), 20);
    EXPECT_NE(a, b) << "key " << key;
    first_draws.insert(a[0]);
  }
  EXPECT_EQ(first_draws.size(), 1000u);
}

TEST(StatelessRandomTest, RandomKeyDependsOnEveryInput) {
  const uint64_t base = RandomKey(1, 2, 3, 4);
  EXPECT_EQ(RandomKey(1, 2, 3, 4), base);
  EXPECT_NE(RandomKey(9, 2, 3, 4), base);
  EXPECT_NE(RandomKey(1, 9, 3, 4), base);
  EXPECT_NE(RandomKey(1, 2, 9, 4), base);
  EXPECT_NE(RandomKey(1, 2, 3, 9), base);
  // Swapping values between positions changes the key too.
  EXPECT_NE(RandomKey(2, 1, 3, 4), base);
  EXPECT_NE(RandomKey(1, 2, 4, 3), base);
}

TEST(StatelessRandomTest, UniformStaysInRange) {
  const uint64_t key = 777;
  StatelessRandom rng(key);
  for (uint64_t n : {1ULL, 2ULL, 3ULL, 7ULL, 1000ULL, (1ULL << 63) + 1, ~0ULL}) {
    for (int i = 0; i < 2000; ++i) {
      const uint64_t x = rng.Uniform(n);
      ASSERT_LT(x, n) << "key " << key << " n " << n << " draw " << i;
    }
  }
  StatelessRandom one(key);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one.Uniform(1), 0u);
}

TEST(StatelessRandomTest, UniformIsRoughlyUniform) {
  constexpr int kBuckets = 10;
  constexpr int kDraws = 100000;
  for (uint64_t key : {1ULL, 2024ULL, 0x9e3779b97f4a7c15ULL}) {
    StatelessRandom rng(key);
    std::vector<int> counts(kBuckets, 0);
    for (int i = 0; i < kDraws; ++i) ++counts[rng.Uniform(kBuckets)];
    // Chi-square with 9 degrees of freedom: 99.9999th percentile is about 43.
    const double expected = static_cast<double>(kDraws) / kBuckets;
    double chi2 = 0;
    for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
    EXPECT_LT(chi2, 43.0) << "key (seed) " << key;
  }
}

TEST(StatelessRandomTest, UniformDoubleIsInUnitIntervalWithMeanOneHalf) {
  const uint64_t key = 31337;
  StatelessRandom rng(key);
  constexpr int kDraws = 100000;
  double sum = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double x = rng.UniformDouble();
    ASSERT_GE(x, 0.0) << "key " << key;
    ASSERT_LT(x, 1.0) << "key " << key;
    sum += x;
  }
  // Standard error of the mean is sqrt(1/12 / n) ~ 0.0009; allow 6 of them.
  EXPECT_NEAR(sum / kDraws, 0.5, 0.0055) << "key " << key;
}

}  // namespace
}  // namespace granary
