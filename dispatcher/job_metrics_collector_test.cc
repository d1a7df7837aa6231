#include "dispatcher/job_metrics_collector.h"

#include "gtest/gtest.h"

namespace granary {
namespace {

TEST(JobMetricsCollectorTest, APeriodIsTheIncreaseOfTheTotalsPerElement) {
  JobMetricsCollector c;
  c.ReaderTotals(1, 0, 10, 20'000, 50'000);  // before the period: its base
  c.ProducerTotals(1, 7, false, 30, 600'000);
  ASSERT_TRUE(c.Take(1, 1).has_value());  // the first reports count whole
  c.ReaderTotals(1, 0, 110, 120'000, 550'000);
  c.ProducerTotals(1, 7, false, 80, 1'600'000);
  c.ProducerTotals(1, 8, false, 50, 1'000'000);
  const std::optional<JobMetrics> m = c.Take(1, 5);
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->wait_s, 0.1 / 100);  // 100 ms over 100 elements
  EXPECT_DOUBLE_EQ(m->step_s, 0.5 / 100);
  EXPECT_DOUBLE_EQ(m->remote_worker_rate, 100 / 2.0);  // 100 made in 2 busy seconds
  EXPECT_FALSE(c.Take(1, 1).has_value()) << "taken: the next period is empty";
}

TEST(JobMetricsCollectorTest, LocalAndRemoteRunnersAreMeasuredApart) {
  JobMetricsCollector c;
  c.ReaderTotals(5, 0, 100, 0, 100'000);
  c.ProducerTotals(5, 1, false, 60, 2'000'000);  // remote: 30/s
  c.ProducerTotals(5, 2, true, 40, 500'000);     // local: 80/s
  std::optional<JobMetrics> m = c.Take(5, 1);
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->remote_worker_rate, 30);
  EXPECT_DOUBLE_EQ(m->local_worker_rate, 80);
  // Only local runners busy: measured, with no remote rate.
  c.ReaderTotals(5, 0, 200, 0, 200'000);
  c.ProducerTotals(5, 2, true, 140, 1'500'000);
  m = c.Take(5, 1);
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->remote_worker_rate, 0);
  EXPECT_DOUBLE_EQ(m->local_worker_rate, 100);
}

TEST(JobMetricsCollectorTest, ANewReaderOrRunnerCountsWholeAndHostileTotalsDoNotGoNegative) {
  JobMetricsCollector c;
  c.ReaderTotals(2, 0, 500, 1'000, 1'000);
  c.ProducerTotals(2, 1, false, 500, 1'000'000);
  ASSERT_TRUE(c.Take(2, 1).has_value());
  // A new epoch's reader and a new generation's runner start again from zero.
  c.ReaderTotals(2, 0, 20, 2'000, 40'000);
  c.ProducerTotals(2, 1, false, 20, 400'000);
  const std::optional<JobMetrics> m = c.Take(2, 1);
  ASSERT_TRUE(m.has_value());
  EXPECT_DOUBLE_EQ(m->step_s, 0.04 / 20);
  EXPECT_DOUBLE_EQ(m->remote_worker_rate, 50);
}

TEST(JobMetricsCollectorTest, TooFewElementsKeepThePeriodGoingAndJobsAreKeptApart) {
  JobMetricsCollector c;
  c.ReaderTotals(3, 0, 3, 100, 100);
  c.ProducerTotals(3, 1, false, 3, 100);
  EXPECT_FALSE(c.Take(3, 5).has_value());
  c.ReaderTotals(3, 0, 6, 200, 200);
  EXPECT_TRUE(c.Take(3, 5).has_value());
  c.ReaderTotals(4, 0, 100, 1, 1);
  EXPECT_FALSE(c.Take(4, 5).has_value()) << "no producer was busy";
  c.Forget(4);
  c.ProducerTotals(4, 9, false, 10, 1'000);
  EXPECT_FALSE(c.Take(4, 5).has_value()) << "forgotten: nothing delivered since";
}

}  // namespace
}  // namespace granary
