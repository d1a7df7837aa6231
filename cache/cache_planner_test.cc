#include "cache/cache_planner.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A recorded profile: the source and a decode-like segment before the first mark (op 3), cheap
// ops before the second (op 5), augmentation after it.
struct Shape {
  double first_segment = 2.0;   // source + decode
  double second_segment = 0.1;  // e.g. resize
  double tail = 0.3;            // augmentation
  double read = 0.05;           // reading a point's sample back
  double write = 0.1;           // writing it
  int64_t bytes = 1 << 20;      // per point, per sample
};

CacheProfile Profile(const Shape& s) {
  CacheProfile profile;
  profile.set_sample_records(64);
  profile.set_estimated_records(6400);
  profile.set_tail_seconds(s.tail);
  for (const auto& [point, segment] :
       std::vector<std::pair<int, double>>{{3, s.first_segment}, {5, s.second_segment}}) {
    CachePointProfile* p = profile.add_points();
    p->set_cache_point(point);
    p->set_segment_seconds(segment);
    p->set_elements(64);
    p->set_bytes(s.bytes);
    p->set_write_seconds(s.write);
    p->set_read_seconds(s.read);
  }
  return profile;
}

CachePlanInput Input(const Shape& s, int64_t epochs) {
  CachePlanInput input;
  input.profile = Profile(s);
  input.epochs = epochs;
  return input;
}

TEST(CachePlannerTest, ADecodeHeavyPrefixIsCachedAtTheDeepestMarkThatSavesMost) {
  // Compute 2.4/epoch; Get at 3: 0.05+0.1+0.3 = 0.45; Get at 5: 0.05+0.3 = 0.35.
  const CacheDecision decision = PlanCache(Input(Shape{}, 4));
  EXPECT_EQ(decision.cache_point(), 5) << decision.reason();
  EXPECT_THAT(decision.reason(), HasSubstr("cache at op 5"));
  EXPECT_THAT(decision.reason(), HasSubstr("compute 2.4s"));
}

TEST(CachePlannerTest, TheOpsAfterTheMarkCountAgainstTheCache) {
  // Reading a point back (0.25 s) beats computing the prefix (0.3 s): a model without the ops
  // after the mark would cache. With them (2.0 s a sample, run every epoch either way) the
  // saving is 2%, which the Put's write eats: compute.
  Shape s;
  s.first_segment = 0.3;
  s.second_segment = 0.0;
  s.tail = 2.0;
  s.read = 0.25;
  s.write = 0.1;
  const CacheDecision decision = PlanCache(Input(s, 4));
  EXPECT_EQ(decision.cache_point(), 0) << decision.reason();
  // The same prefix with cheap ops after it: cached.
  s.tail = 0.0;
  EXPECT_EQ(PlanCache(Input(s, 4)).cache_point(), 3) << PlanCache(Input(s, 4)).reason();
}

TEST(CachePlannerTest, ASlowStorageMeansCompute) {
  Shape s;
  s.read = 3.0;  // Reading back is slower than computing.
  const CacheDecision decision = PlanCache(Input(s, 10));
  EXPECT_EQ(decision.cache_point(), 0) << decision.reason();
  EXPECT_THAT(decision.reason(), HasSubstr("compute ("));
}

TEST(CachePlannerTest, TheOneTimePutCostCountsOverTheRemainingEpochs) {
  // A Put that costs more than the Get saves pays off over many epochs, not over one or two.
  Shape s;
  s.first_segment = 1.0;
  s.second_segment = 0.0;
  s.tail = 0.0;
  s.read = 0.5;
  s.write = 1.0;
  // compute E·1.0 vs put 2.0 + (E−1)·0.5 at either mark (ties go to the earlier one).
  EXPECT_EQ(PlanCache(Input(s, 1)).cache_point(), 0);
  EXPECT_EQ(PlanCache(Input(s, 3)).cache_point(), 0);  // 3.0 vs 3.0: no gain.
  EXPECT_EQ(PlanCache(Input(s, 4)).cache_point(), 3);  // 4.0 vs 3.5, at either mark.
  EXPECT_EQ(PlanCache(Input(s, 0)).cache_point(), 3);  // Unbounded.
}

TEST(CachePlannerTest, AnExistingCacheIsReadWithoutAPut) {
  Shape s;
  s.write = 100;  // A Put never pays...
  CachePlanInput input = Input(s, 2);
  EXPECT_EQ(PlanCache(input).cache_point(), 0);
  input.existing_points = {3};  // ...but another job's cache at op 3 is there to read.
  const CacheDecision decision = PlanCache(input);
  EXPECT_EQ(decision.cache_point(), 3) << decision.reason();
  EXPECT_THAT(decision.reason(), HasSubstr("at op 3 get"));
}

TEST(CachePlannerTest, ACacheThatDoesNotFitIsNoChoice) {
  CachePlanInput input = Input(Shape{}, 4);
  // 1 MiB per 64-record sample, 6400 records: 100 MiB per point.
  EXPECT_EQ(EstimatedCacheBytes(input.profile, 5), 100 << 20);
  input.room_bytes = (100 << 20) - 1;
  const CacheDecision decision = PlanCache(input);
  EXPECT_EQ(decision.cache_point(), 0) << decision.reason();
  EXPECT_THAT(decision.reason(), HasSubstr("no room"));
  input.room_bytes = 100 << 20;
  EXPECT_EQ(PlanCache(input).cache_point(), 5);
}

TEST(CachePlannerTest, DecisionsOnARecordedProfileAreDeterministic) {
  // The same profile and cache table: the same bytes, on every call.
  const CachePlanInput input = Input(Shape{}, 7);
  const std::string first = PlanCache(input).SerializeAsString();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(PlanCache(input).SerializeAsString(), first);
}

TEST(CachePlannerTest, ProfilesThatDoNotMatchThePipelineAreRefusedByName) {
  const CacheProfile good = Profile(Shape{});
  EXPECT_TRUE(CheckCacheProfile(good, {3, 5}).ok());
  EXPECT_THAT(std::string(CheckCacheProfile(good, {3}).message()), HasSubstr("2 points measured"));
  EXPECT_THAT(std::string(CheckCacheProfile(good, {3, 6}).message()), HasSubstr("point 1 is 5"));
  CacheProfile bad = good;
  bad.mutable_points(0)->set_read_seconds(-1);
  EXPECT_THAT(std::string(CheckCacheProfile(bad, {3, 5}).message()),
              HasSubstr("point 3 has a negative or non-finite measure"));
  bad = good;
  bad.set_sample_records(0);
  EXPECT_THAT(std::string(CheckCacheProfile(bad, {3, 5}).message()), HasSubstr("a sample of 0"));
  bad = good;
  bad.set_tail_seconds(std::numeric_limits<double>::infinity());
  EXPECT_FALSE(CheckCacheProfile(bad, {3, 5}).ok());
}

TEST(CachePlannerTest, EvictionTakesTheLeastRecentlyUsedCachesNoEpochReads) {
  const std::vector<CacheUsage> caches = {
      {"a", 40, /*last_used_seq=*/5, /*in_use=*/false},
      {"b", 40, /*last_used_seq=*/1, /*in_use=*/true},  // Oldest, but read now: never evicted.
      {"c", 40, /*last_used_seq=*/3, /*in_use=*/false},
  };
  // 120 used of 150: 30 fit without evicting.
  EXPECT_THAT(*EvictionsToFit(caches, 30, 150), ElementsAre());
  EXPECT_THAT(*EvictionsToFit(caches, 60, 150), ElementsAre("c"));
  EXPECT_THAT(*EvictionsToFit(caches, 100, 150), ElementsAre("c", "a"));
  // Not even evicting a and c makes room for 111 (b's 40 stay).
  EXPECT_FALSE(EvictionsToFit(caches, 111, 150).has_value());
}

}  // namespace
}  // namespace granary
