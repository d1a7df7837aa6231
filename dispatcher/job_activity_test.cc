#include "dispatcher/job_activity.h"

#include "gtest/gtest.h"

namespace granary {
namespace {

constexpr uint64_t kSecond = 1000000;

TEST(JobActivityTrackerTest, TotalsAccumulateAndRatesSpanTheWindow) {
  JobActivityTracker tracker;
  tracker.AddDelivered(7, 100, 1000, 5000, 10 * kSecond);
  tracker.AddDelivered(7, 100, 3000, 5000, 12 * kSecond);
  std::vector<JobActivity> jobs = tracker.Jobs(12 * kSecond);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].job_id(), 7);
  EXPECT_EQ(jobs[0].delivered(), 200);
  EXPECT_EQ(jobs[0].wait_us(), 4000);
  EXPECT_EQ(jobs[0].step_us(), 10000);
  // From the first sample (t=10 s, 100 delivered) to now: 100 more in 2 s; 3 ms waited for them.
  EXPECT_DOUBLE_EQ(jobs[0].elements_per_second(), 50);
  EXPECT_DOUBLE_EQ(jobs[0].wait_seconds_per_element(), 30e-6);
}

TEST(JobActivityTrackerTest, AQuietJobsRateDecaysAndOldSamplesLeaveTheWindow) {
  JobActivityTracker tracker;
  tracker.AddDelivered(1, 10, 0, 0, 0);
  tracker.AddDelivered(1, 10, 0, 0, 1 * kSecond);
  EXPECT_DOUBLE_EQ(tracker.Jobs(1 * kSecond)[0].elements_per_second(), 10);
  // Nothing more for 9 s: 10 elements over 10 s.
  EXPECT_DOUBLE_EQ(tracker.Jobs(10 * kSecond)[0].elements_per_second(), 1);
  // Much later, two reports 1 s apart: the rate is theirs (older samples dropped, but one).
  tracker.AddDelivered(1, 10, 0, 0, 100 * kSecond);
  tracker.AddDelivered(1, 30, 0, 0, 101 * kSecond);
  EXPECT_DOUBLE_EQ(tracker.Jobs(101 * kSecond)[0].elements_per_second(), 30);
}

TEST(JobActivityTrackerTest, TasksKeepTheirLastTransportAndAreForgotten) {
  JobActivityTracker tracker;
  tracker.TaskReport(5, 10, "shm");
  tracker.TaskReport(5, 20, "");  // no answer since: the transport stays
  TaskActivity a;
  tracker.FillTask(5, &a);
  EXPECT_EQ(a.produced(), 20);
  EXPECT_EQ(a.transport(), "shm");
  tracker.ForgetTask(5);
  TaskActivity b;
  tracker.FillTask(5, &b);
  EXPECT_EQ(b.produced(), 0);
  tracker.AddDelivered(2, 1, 0, 0, 0);
  tracker.Forget(2);
  EXPECT_TRUE(tracker.Jobs(0).empty());
}

}  // namespace
}  // namespace granary
