#include "obs/metrics.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/exposition_parser.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

TEST(MetricRegistryTest, CountersGaugesAndCollectorsRenderAsOneParsableExposition) {
  MetricRegistry registry;
  registry.GetCounter("granary_test_elements_total", "Elements.", {{"job", "1"}})->Add(5);
  registry.GetCounter("granary_test_elements_total", "Elements.", {{"job", "2"}})->Add(7);
  registry.GetGauge("granary_test_fill_ratio", "Fill.")->Set(0.25);
  registry.AddCollector([](MetricSamples& out) {
    out.AddGauge("granary_test_workers", "Workers by state.", {{"state", "live"}}, 3);
    out.AddGauge("granary_test_workers", "Workers by state.", {{"state", "lost"}}, 1);
  });
  const std::string text = registry.RenderText();
  absl::StatusOr<Exposition> parsed = ParseExposition(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(parsed->types.at("granary_test_elements_total"), "counter");
  EXPECT_EQ(parsed->types.at("granary_test_workers"), "gauge");
  EXPECT_EQ(parsed->Sum("granary_test_elements_total"), 12);
  EXPECT_EQ(parsed->Sum("granary_test_elements_total", {{"job", "2"}}), 7);
  EXPECT_EQ(parsed->Sum("granary_test_fill_ratio"), 0.25);
  EXPECT_EQ(parsed->Sum("granary_test_workers", {{"state", "lost"}}), 1);
}

TEST(MetricRegistryTest, TheSameNameAndLabelsGiveTheSameInstrument) {
  MetricRegistry registry;
  Counter* a = registry.GetCounter("granary_test_total", "x", {{"job", "1"}});
  EXPECT_EQ(a, registry.GetCounter("granary_test_total", "x", {{"job", "1"}}));
  EXPECT_NE(a, registry.GetCounter("granary_test_total", "x", {{"job", "2"}}));
}

TEST(MetricRegistryTest, LabelValuesAreEscaped) {
  MetricRegistry registry;
  registry.GetGauge("granary_test_named", "x", {{"name", "a\"b\\c\nd"}})->Set(1);
  const std::string text = registry.RenderText();
  EXPECT_THAT(text, HasSubstr(R"(name="a\"b\\c\nd")"));
  absl::StatusOr<Exposition> parsed = ParseExposition(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->samples[0].labels.at("name"), "a\"b\\c\nd");
}

TEST(MetricRegistryTest, HistogramBucketsAreCumulativeWithSumAndCount) {
  MetricRegistry registry;
  Histogram* h = registry.GetHistogram("granary_test_seconds", "Latency.", {0.001, 0.01, 0.1});
  for (const double v : {0.0005, 0.005, 0.005, 0.05, 5.0}) h->Observe(v);
  absl::StatusOr<Exposition> parsed = ParseExposition(registry.RenderText());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Sum("granary_test_seconds_bucket", {{"le", "0.001"}}), 1);
  EXPECT_EQ(parsed->Sum("granary_test_seconds_bucket", {{"le", "0.01"}}), 3);
  EXPECT_EQ(parsed->Sum("granary_test_seconds_bucket", {{"le", "0.1"}}), 4);
  EXPECT_EQ(parsed->Sum("granary_test_seconds_bucket", {{"le", "+Inf"}}), 5);
  EXPECT_EQ(parsed->Sum("granary_test_seconds_count"), 5);
  EXPECT_NEAR(parsed->Sum("granary_test_seconds_sum"), 5.0605, 1e-9);
}

TEST(MetricRegistryTest, ConcurrentIncrementsAreAllCounted) {
  MetricRegistry registry;
  Counter* c = registry.GetCounter("granary_test_total", "x");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) c->Increment();
    });
  }
  std::thread renderer([&] {
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(ParseExposition(registry.RenderText()).ok());
  });
  for (auto& t : threads) t.join();
  renderer.join();
  EXPECT_EQ(c->value(), 40000);
}

TEST(MetricRegistryTest, ExponentialBuckets) {
  EXPECT_THAT(ExponentialBuckets(1, 10, 3), ::testing::ElementsAre(1, 10, 100));
}

}  // namespace
}  // namespace granary
