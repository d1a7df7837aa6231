#include "common/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

TEST(ThreadPoolTest, ReportsItsThreadCount) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.num_threads(), 3);
}

TEST(ThreadPoolTest, DestructorRunsEverythingScheduledBeforeIt) {
  std::atomic<int> done{0};
  {
    ThreadPool pool(2);
    // A slow first closure keeps the queue full when the destructor starts.
    pool.Schedule([&] {
      absl::SleepFor(absl::Milliseconds(50));
      done.fetch_add(1);
    });
    for (int i = 0; i < 999; ++i) pool.Schedule([&] { done.fetch_add(1); });
  }
  EXPECT_EQ(done.load(), 1000);
}

TEST(ThreadPoolTest, OneThreadRunsClosuresInFifoOrder) {
  std::vector<int> order;  // Only the pool's one thread touches it until the join.
  {
    ThreadPool pool(1);
    for (int i = 0; i < 100; ++i) pool.Schedule([&order, i] { order.push_back(i); });
  }
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

// Each of kThreads closures waits until all kThreads are running at once: this can only finish
// if the pool runs them in parallel. The wait has a deadline so a serial pool fails, not hangs.
TEST(ThreadPoolTest, RunsClosuresInParallel) {
  constexpr int kThreads = 4;
  absl::Mutex mu;
  int running = 0;
  int met = 0;
  {
    ThreadPool pool(kThreads);
    for (int i = 0; i < kThreads; ++i) {
      pool.Schedule([&] {
        absl::MutexLock lock(&mu);
        ++running;
        auto all_running = [&] { return running == kThreads; };
        if (mu.AwaitWithTimeout(absl::Condition(&all_running), absl::Seconds(10))) ++met;
      });
    }
  }
  EXPECT_EQ(met, kThreads);
}

// With two of four threads active, closures run on at most two distinct threads at once, and
// never more than two at a time; raised to four, four run at once again.
TEST(ThreadPoolTest, OnlyActiveThreadsTakeClosures) {
  absl::Mutex mu;
  int running = 0;
  int most = 0;
  ThreadPool pool(4);
  pool.SetActiveThreads(2);
  std::atomic<int> done{0};
  for (int i = 0; i < 40; ++i) {
    pool.Schedule([&] {
      {
        absl::MutexLock lock(&mu);
        most = std::max(most, ++running);
      }
      absl::SleepFor(absl::Milliseconds(2));
      absl::MutexLock lock(&mu);
      --running;
      done.fetch_add(1);
    });
  }
  while (done.load() < 40) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_LE(most, 2) << "never more closures at once than active threads";
  pool.SetActiveThreads(4);
  absl::Mutex meet_mu;
  int meeting = 0, met = 0;
  for (int i = 0; i < 4; ++i) {
    pool.Schedule([&] {
      absl::MutexLock lock(&meet_mu);
      ++meeting;
      auto all = [&] { return meeting == 4; };
      if (meet_mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(10))) ++met;
    });
  }
  absl::MutexLock lock(&meet_mu);
  meet_mu.AwaitWithTimeout(absl::Condition(
                               +[](int* m) { return *m == 4; }, &met),
                           absl::Seconds(20));
  EXPECT_EQ(met, 4);
}

}  // namespace
}  // namespace granary
