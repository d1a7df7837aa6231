#include "common/read_stride.h"

#include "gtest/gtest.h"

namespace granary {
namespace {

// CountIn must agree with counting Reads one index at a time.
int64_t Counted(const ReadStride& stride, int64_t from, int64_t to) {
  int64_t n = 0;
  for (int64_t i = from; i < to; ++i) n += stride.Reads(i) ? 1 : 0;
  return n;
}

TEST(ReadStrideTest, TheDefaultReadsEveryIndex) {
  const ReadStride every;
  for (int64_t i = 0; i < 10; ++i) EXPECT_TRUE(every.Reads(i)) << i;
  EXPECT_EQ(every.CountIn(3, 10), 7);
  EXPECT_EQ(ReadStride(0, 0).CountIn(3, 10), 7);
  EXPECT_EQ(ReadStride(1, 0).CountIn(0, 4), 4);
}

TEST(ReadStrideTest, AStrideReadsItsResidueOnly) {
  const ReadStride third(3, 1);
  EXPECT_FALSE(third.Reads(0));
  EXPECT_TRUE(third.Reads(1));
  EXPECT_FALSE(third.Reads(2));
  EXPECT_TRUE(third.Reads(4));
}

TEST(ReadStrideTest, CountInAgreesWithReadsOverEveryRange) {
  for (int64_t stride = 1; stride <= 5; ++stride) {
    for (int64_t offset = 0; offset < stride; ++offset) {
      const ReadStride s(stride, offset);
      for (int64_t from = 0; from <= 12; ++from) {
        for (int64_t to = 0; to <= 12; ++to) {
          EXPECT_EQ(s.CountIn(from, to), Counted(s, from, to))
              << "stride " << stride << " offset " << offset << " [" << from << ", " << to << ")";
        }
      }
    }
  }
}

TEST(ReadStrideTest, TheOffsetsOfOneStrideShareEveryIndexExactlyOnce) {
  for (int64_t i = 0; i < 30; ++i) {
    int readers = 0;
    for (int64_t offset = 0; offset < 4; ++offset) readers += ReadStride(4, offset).Reads(i);
    EXPECT_EQ(readers, 1) << i;
  }
}

}  // namespace
}  // namespace granary
