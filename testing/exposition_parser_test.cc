#include "testing/exposition_parser.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const char* text) {
  absl::StatusOr<Exposition> parsed = ParseExposition(text);
  return parsed.ok() ? "parsed" : std::string(parsed.status().message());
}

TEST(ExpositionParserTest, ReadsLabelsValuesAndTimestamps) {
  absl::StatusOr<Exposition> e = ParseExposition(
      "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\",y=\"q\\\"\"} 3 1700000000\n"
      "# TYPE g gauge\ng NaN\ng{z=\"\"} -Inf\n");
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->samples.size(), 3u);
  EXPECT_EQ(e->samples[0].labels.at("y"), "q\"");
  EXPECT_EQ(e->Sum("a_total", {{"x", "1"}}), 3);
  EXPECT_TRUE(e->Has("g"));
}

TEST(ExpositionParserTest, ASampleBeforeItsTypeIsAnError) {
  EXPECT_THAT(ErrorOf("a 1\n"), HasSubstr("line 1: sample a before its TYPE"));
}

TEST(ExpositionParserTest, ABadValueIsAnError) {
  EXPECT_THAT(ErrorOf("# TYPE a gauge\na one\n"), HasSubstr("line 2: bad value 'one'"));
}

TEST(ExpositionParserTest, AnUnterminatedLabelIsAnError) {
  EXPECT_THAT(ErrorOf("# TYPE a gauge\na{x=\"1} 2\n"), HasSubstr("unterminated"));
}

TEST(ExpositionParserTest, ATypeTwiceIsAnError) {
  EXPECT_THAT(ErrorOf("# TYPE a gauge\n# TYPE a counter\n"), HasSubstr("second TYPE of a"));
}

TEST(ExpositionParserTest, AHistogramWhoseInfBucketIsNotItsCountIsAnError) {
  EXPECT_THAT(ErrorOf("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
                      "h_sum 3\nh_count 3\n"),
              HasSubstr("the +Inf bucket is not the _count"));
}

TEST(ExpositionParserTest, AHistogramWithDecreasingBucketsIsAnError) {
  EXPECT_THAT(ErrorOf("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\n"
                      "h_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n"),
              HasSubstr("not ascending and cumulative"));
}

}  // namespace
}  // namespace granary
