#include "pipeline/digests/epoch_digest.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

Element Batch(std::vector<int64_t> values) {
  Element e;
  e.tensors.push_back(
      Tensor::FromVector<int64_t>({static_cast<int64_t>(values.size())}, values));
  return e;
}

Element Row(int64_t value) {
  Element e;
  e.tensors.push_back(Tensor::Scalar<int64_t>(value));
  return e;
}

TEST(EpochDigestTest, MultisetIgnoresOrderAndBatchingOrderedDoesNot) {
  EpochDigest a(true), b(true);
  a.Add(Batch({1, 2, 3}));
  a.Add(Batch({4}));
  b.Add(Batch({4, 3}));
  b.Add(Batch({2, 1}));
  EXPECT_EQ(a.rows(), 4);
  EXPECT_EQ(b.rows(), 4);
  EXPECT_EQ(a.multiset(), b.multiset());
  EXPECT_NE(a.ordered(), b.ordered());
}

TEST(EpochDigestTest, DuplicateOrMissingRowChangesMultiset) {
  EpochDigest all(false), duplicated(false), missing(false);
  for (int64_t v : {1, 2, 3}) all.Add(Row(v));
  for (int64_t v : {1, 2, 2, 3}) duplicated.Add(Row(v));
  for (int64_t v : {1, 3}) missing.Add(Row(v));
  EXPECT_NE(all.multiset(), duplicated.multiset());
  EXPECT_NE(all.multiset(), missing.multiset());
}

TEST(EpochDigestTest, BatchRowsHashLikeUnbatchedElementsOfTheSameValue) {
  // A row of a batch is hashed as the element it was before batching.
  EpochDigest batched(true), unbatched(false);
  batched.Add(Batch({5, 6}));
  unbatched.Add(Row(5));
  unbatched.Add(Row(6));
  EXPECT_EQ(batched.multiset(), unbatched.multiset());
  EXPECT_EQ(batched.ordered(), unbatched.ordered());
}

TEST(EpochDigestTest, JsonLineHasTheDesignFields) {
  EpochDigest d(false);
  d.Add(Row(1));
  EXPECT_THAT(d.Line(3, 2, 5).ToJson(),
              ::testing::MatchesRegex(R"(\{"epoch":3,"elements":1,"multiset_xxh64":"[0-9a-f]{16}",)"
                                      R"("ordered_xxh64":"[0-9a-f]{16}","duplicates_dropped":2,)"
                                      R"("skipped":5\})"));
}

}  // namespace
}  // namespace granary
