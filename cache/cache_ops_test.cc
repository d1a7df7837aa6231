#include "cache/cache_ops.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline.h"
#include "pipeline/core/split_provider.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CacheOpsTest, RegistersCacheWriteAndCacheReadWithTheirTraits) {
  OpRegistry ops;
  SourceRegistry sources;
  ASSERT_TRUE(RegisterCacheOps(&ops, &sources).ok());
  EXPECT_THAT(ops.Names(), ElementsAre("cache_write"));
  EXPECT_THAT(sources.Names(), ElementsAre("cache_read"));
  EXPECT_TRUE(ops.Find("cache_write")->inserted_by_service);
  EXPECT_TRUE(sources.Find("cache_read")->keeps_provenance);
  EXPECT_TRUE(sources.Find("cache_read")->reads_cache_chunks);
}

TEST(CacheOpsTest, RegisteringTwiceIsRefusedNamingTheOp) {
  OpRegistry ops;
  SourceRegistry sources;
  ASSERT_TRUE(RegisterCacheOps(&ops, &sources).ok());
  const absl::Status again = RegisterCacheOps(&ops, &sources);
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("cache_write"));
}

TEST(CacheOpsTest, OnlyRegistriesWithTheCacheBuildACacheReadPipeline) {
  PipelineDef def;
  def.mutable_source()->set_type("cache_read");
  (*def.mutable_source()->mutable_params()->mutable_fields())["files"]
      .mutable_list_value()
      ->add_values()
      ->set_string_value("/cache/key/*.chunk");
  const absl::Status without = Pipeline::Create(def, PipelineRegistries::WithBuiltins()).status();
  EXPECT_THAT(std::string(without.message()), HasSubstr("unknown type 'cache_read'"));
  const absl::Status with = Pipeline::Create(def, PipelineRegistriesWithCache()).status();
  EXPECT_TRUE(with.ok()) << with;
}

TEST(CacheOpsTest, CacheWriteRunsOnlyWithACacheSinkLentToTheRun) {
  PipelineDef def;
  def.mutable_source()->set_type("range");
  (*def.mutable_source()->mutable_params()->mutable_fields())["stop"].set_number_value(3);
  def.add_ops()->set_op("cache_write");
  const absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create(def, PipelineRegistriesWithCache());
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  const absl::Status no_sink =
      (*pipeline)
          ->MakeIterator(IteratorContext{},
                         std::make_unique<PlannedSplitProvider>(std::vector<Split>(1)))
          .status();
  EXPECT_TRUE(absl::IsFailedPrecondition(no_sink)) << no_sink;
  EXPECT_THAT(std::string(no_sink.message()), HasSubstr("no cache sink"));
}

}  // namespace
}  // namespace granary
