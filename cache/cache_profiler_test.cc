#include "cache/cache_profiler.h"

#include "absl/strings/str_cat.h"
#include "cache/cache_ops.h"
#include "cache/cache_planner.h"
#include "cache/cache_policy.h"
#include "testing/scoped_temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/pipeline_loader.h"
#include "tools/synthetic_imagenet.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kImages = 96;

// A decode-heavy pipeline on real JPEG TFRecords: marks after the decode (op 3) and at the end
// (op 6), with a crop between them — or, without the end mark, a simulated 500 µs a record after
// the crop.
std::string PipelineJson(const std::string& data_dir, bool mark_at_end) {
  return absl::StrCat(R"({"source": {"type": "tfrecord", "params": {"files": [")", data_dir,
                      R"(/*.tfrecord"]}},
  "ops": [
    {"op": "map", "udf": "parse_example",
     "udfParams": {"keys": ["image/encoded"], "dtypes": ["bytes"]}},
    {"op": "map", "udf": "decode_jpeg"},
    {"op": "mark", "params": {"name": "decoded"}},
    {"op": "map", "udf": "random_crop", "udfParams": {"fraction": 0.5}},
    {"op": "map", "udf": "random_flip"})",
                      mark_at_end ? R"(,
    {"op": "mark", "params": {"name": "end"}})"
                                  : R"(,
    {"op": "map", "udf": "simulate_cost", "udfParams": {"us_per_element": 500}})",
                      "]}");
}

class CacheProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticImagenetOptions data;
    data.out_dir = dir_.Join("data");
    data.images = kImages;
    data.files = 2;
    data.size = 96;
    ASSERT_TRUE(WriteSyntheticImagenet(Env::Default(), data).ok());
  }

  CacheProfileRequest Request(bool mark_at_end) {
    absl::StatusOr<PipelineDef> def =
        ParsePipelineJson(PipelineJson(dir_.Join("data"), mark_at_end), "test");
    EXPECT_TRUE(def.ok()) << def.status();
    CacheProfileRequest request;
    *request.mutable_pipeline() = *def;
    request.set_seed(7);
    for (const int point : MarkPoints(*def)) request.add_cache_points(point);
    request.set_probe_dir(dir_.Join("cache/probe-1-w"));
    request.set_sample_records(32);
    return request;
  }

  CacheProfilerOptions Options() {
    CacheProfilerOptions options;
    options.registries = &registries_;
    return options;
  }

  testing::ScopedTempDir dir_;
  const PipelineRegistries registries_ = PipelineRegistriesWithCache();
};

TEST_F(CacheProfilerTest, MeasuresEveryMarkOnTheSampleAndCleansUpItsProbe) {
  const CacheProfileRequest request = Request(/*mark_at_end=*/true);
  absl::StatusOr<CacheProfile> profile = ProfileCachePoints(request, Options());
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->sample_records(), 32);
  // Two files of 48 records: the estimate scales the sample's bytes per record to the files'.
  EXPECT_GT(profile->estimated_records(), kImages / 2);
  EXPECT_LT(profile->estimated_records(), kImages * 2);
  ASSERT_EQ(profile->points_size(), 2);
  EXPECT_TRUE(CheckCacheProfile(*profile, {3, 6}).ok());
  const CachePointProfile& decoded = profile->points(0);
  const CachePointProfile& end = profile->points(1);
  EXPECT_EQ(decoded.cache_point(), 3);
  EXPECT_EQ(end.cache_point(), 6);
  EXPECT_EQ(decoded.elements(), 32);
  EXPECT_EQ(end.elements(), 32);
  // Decoded 96×96×3 pixels per element; the crop keeps a quarter of them.
  EXPECT_GT(decoded.bytes(), 32 * 96 * 96 * 3);
  EXPECT_LT(end.bytes(), decoded.bytes() / 2);
  EXPECT_GT(decoded.segment_seconds(), 0);  // The source and the JPEG decode.
  EXPECT_GT(decoded.write_seconds(), 0);
  EXPECT_GT(decoded.read_seconds(), 0);
  EXPECT_EQ(profile->tail_seconds(), 0);  // The last mark ends the pipeline.
  // The probe is gone, and the cache root with it (nothing else was in it).
  EXPECT_FALSE(Env::Default()->FileExists(request.probe_dir()));
}

TEST_F(CacheProfilerTest, TheOpsAfterTheLastMarkAreTheTail) {
  absl::StatusOr<CacheProfile> profile =
      ProfileCachePoints(Request(/*mark_at_end=*/false), Options());
  ASSERT_TRUE(profile.ok()) << profile.status();
  ASSERT_EQ(profile->points_size(), 1);
  // The 32 records' simulated cost, at least.
  EXPECT_GE(profile->tail_seconds(), 32 * 500e-6);
}

TEST_F(CacheProfilerTest, ACandidateThatIsNoMarkIsRefusedByName) {
  CacheProfileRequest request = Request(/*mark_at_end=*/true);
  request.set_cache_points(0, 2);  // Op 1 is the decode, not a mark.
  absl::StatusOr<CacheProfile> profile = ProfileCachePoints(request, Options());
  EXPECT_EQ(profile.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(profile.status().message()), HasSubstr("candidate point 2"));
}

TEST_F(CacheProfilerTest, ABrokenPipelineNamesItsOpAndLeavesNoProbe) {
  CacheProfileRequest request = Request(/*mark_at_end=*/true);
  // Decoding the label-less parse as PNG fails on every record.
  request.mutable_pipeline()->mutable_ops(1)->set_udf("decode_png");
  absl::StatusOr<CacheProfile> profile = ProfileCachePoints(request, Options());
  ASSERT_FALSE(profile.ok());
  EXPECT_THAT(std::string(profile.status().message()), HasSubstr("cache profile"));
  EXPECT_THAT(std::string(profile.status().message()), HasSubstr("decode_png"));
  EXPECT_FALSE(Env::Default()->FileExists(request.probe_dir()));
}

}  // namespace
}  // namespace granary
