#include "dispatcher/consumer_shares.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

google::protobuf::RepeatedPtrField<Split> Plan(const std::vector<int64_t>& records) {
  google::protobuf::RepeatedPtrField<Split> plan;
  for (size_t i = 0; i < records.size(); ++i) {
    Split* split = plan.Add();
    split->set_id(i);
    split->set_num_records(records[i]);
  }
  return plan;
}

std::vector<int64_t> Indices(const ConsumerShare& share) {
  return {share.plan_index().begin(), share.plan_index().end()};
}

EpochState EqualEpoch(const std::vector<int64_t>& records, int32_t consumers) {
  EpochState epoch;
  *epoch.mutable_plan() = Plan(records);
  for (ConsumerShare& share : DealShares(epoch.plan(), consumers)) {
    *epoch.add_shares() = std::move(share);
  }
  return epoch;
}

TEST(ConsumerSharesTest, AutoShardingIsEqualForSeveralConsumersOnly) {
  JobOptions options;
  options.set_num_consumers(1);
  EXPECT_EQ(EffectiveSharding(options), SHARDING_DYNAMIC);
  options.set_num_consumers(2);
  EXPECT_EQ(EffectiveSharding(options), SHARDING_EQUAL);
  options.set_sharding(SHARDING_DYNAMIC);
  EXPECT_EQ(EffectiveSharding(options), SHARDING_DYNAMIC);
  options.set_num_consumers(1);
  options.set_sharding(SHARDING_EQUAL);
  EXPECT_EQ(EffectiveSharding(options), SHARDING_EQUAL);
}

TEST(ConsumerSharesTest, AlikeSplitsAreDealtRoundRobin) {
  const std::vector<ConsumerShare> shares = DealShares(Plan({8, 8, 8, 8, 8, 8, 8}), 3);
  ASSERT_EQ(shares.size(), 3u);
  EXPECT_THAT(Indices(shares[0]), ElementsAre(0, 3, 6));
  EXPECT_THAT(Indices(shares[1]), ElementsAre(1, 4));
  EXPECT_THAT(Indices(shares[2]), ElementsAre(2, 5));
}

TEST(ConsumerSharesTest, SplitsGoToTheLightestShareByRecords) {
  const std::vector<ConsumerShare> shares = DealShares(Plan({10, 2, 2, 3, 5, 4}), 2);
  // Weights: c0 10; c1 2, 4, 7, 12; then c0 gets 4 (14).
  EXPECT_THAT(Indices(shares[0]), ElementsAre(0, 5));
  EXPECT_THAT(Indices(shares[1]), ElementsAre(1, 2, 3, 4));
}

TEST(ConsumerSharesTest, UnknownSizesWeighOne) {
  const std::vector<ConsumerShare> shares = DealShares(Plan({-1, -1, -1, -1}), 2);
  EXPECT_THAT(Indices(shares[0]), ElementsAre(0, 2));
  EXPECT_THAT(Indices(shares[1]), ElementsAre(1, 3));
}

TEST(ConsumerSharesTest, CacheChunksWeighTheirElements) {
  google::protobuf::RepeatedPtrField<Split> plan = Plan({-1, -1, -1});
  plan[0].mutable_cache_chunk()->set_num_elements(100);
  plan[1].mutable_cache_chunk()->set_num_elements(60);
  plan[2].mutable_cache_chunk()->set_num_elements(30);
  const std::vector<ConsumerShare> shares = DealShares(plan, 2);
  EXPECT_THAT(Indices(shares[0]), ElementsAre(0));
  EXPECT_THAT(Indices(shares[1]), ElementsAre(1, 2));
}

TEST(ConsumerSharesTest, AConsumerLeasesOnlyFromItsShare) {
  EpochState epoch = EqualEpoch({1, 1, 1, 1, 1}, 2);  // 0: {0, 2, 4}; 1: {1, 3}
  EXPECT_THAT(NextPlanIndices(epoch, 1, 5), ElementsAre(1, 3));
  MarkLeased(epoch, 1, 1);
  EXPECT_THAT(NextPlanIndices(epoch, 1, 5), ElementsAre(3));
  EXPECT_THAT(NextPlanIndices(epoch, 0, 2), ElementsAre(0, 2));
  MarkLeased(epoch, 1, 1);
  EXPECT_FALSE(HandsOutSplitsTo(epoch, 1));
  EXPECT_THAT(NextPlanIndices(epoch, 1, 5), IsEmpty());
  EXPECT_TRUE(HandsOutSplitsTo(epoch, 0));
  EXPECT_EQ(epoch.next_split(), 2);
  EXPECT_THAT(LeasedPlanIndices(epoch), ElementsAre(1, 3));
  MarkLeased(epoch, 0, 3);
  EXPECT_FALSE(HandsOutSplitsTo(epoch, 0));
  EXPECT_THAT(LeasedPlanIndices(epoch), ElementsAre(0, 1, 2, 3, 4));
}

TEST(ConsumerSharesTest, ADynamicEpochLeasesThePlanInOrderToAnyConsumer) {
  EpochState epoch;
  *epoch.mutable_plan() = Plan({1, 1, 1});
  EXPECT_THAT(NextPlanIndices(epoch, 1, 2), ElementsAre(0, 1));
  MarkLeased(epoch, 1, 2);
  EXPECT_THAT(NextPlanIndices(epoch, 0, 2), ElementsAre(2));
  EXPECT_THAT(LeasedPlanIndices(epoch), ElementsAre(0, 1));
  epoch.set_finished(true);
  EXPECT_FALSE(HandsOutSplitsTo(epoch, 0));
}

TEST(ConsumerSharesTest, OthersOfReportsTheOtherConsumersBoundsOnly) {
  const std::vector<ConsumerCount> counts = {{5, true}, {9, false}, {7, true}};
  const OtherShares of0 = OthersOf(0, counts, REMAINDER_DROP);
  EXPECT_EQ(of0.num_others(), 2);
  EXPECT_EQ(of0.min_at_least(), 7);
  EXPECT_EQ(of0.max_at_least(), 9);
  EXPECT_FALSE(of0.final());
  EXPECT_TRUE(of0.any_final());
  EXPECT_EQ(of0.min_final(), 7) << "consumer 2's; consumer 1 is not final";
  EXPECT_EQ(of0.remainder(), REMAINDER_DROP);
  const OtherShares of1 = OthersOf(1, counts, REMAINDER_PAD);
  EXPECT_EQ(of1.min_at_least(), 5);
  EXPECT_EQ(of1.max_at_least(), 7);
  EXPECT_TRUE(of1.final());
  EXPECT_EQ(of1.min_final(), 5);
  EXPECT_FALSE(OthersOf(2, {{5, false}, {9, false}, {7, true}}, REMAINDER_DROP).any_final());
  const OtherShares alone = OthersOf(0, {{3, false}}, REMAINDER_PAD);
  EXPECT_EQ(alone.num_others(), 0);
  EXPECT_TRUE(alone.final());
}

}  // namespace
}  // namespace granary
