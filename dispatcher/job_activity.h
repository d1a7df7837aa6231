// JobActivity tracking: what the status page, `granary status --json` and /metrics show of the
// heartbeats — per job, the trainers' elements delivered and time waited (cumulative while this
// dispatcher runs, and as rates over the last kWindow of heartbeats); per task, what its runner
// produced and how its worker last answered. Fed with the increases JobMetricsCollector
// computes (it sees a reader's totals restart) and with the workers' heartbeats. Not journaled:
// a restarted dispatcher starts afresh. Thread-compatible (DispatcherImpl serializes access).
#ifndef GRANARY_DISPATCHER_JOB_ACTIVITY_H_
#define GRANARY_DISPATCHER_JOB_ACTIVITY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "proto/dispatcher.pb.h"

namespace granary {

class JobActivityTracker {
 public:
  // Rates run from the oldest report kept — the oldest of the last this long, or of the last two
  // if they are older — until now, so a job whose trainers went quiet decays towards 0.
  static constexpr uint64_t kWindowUs = 10'000'000;

  // A reader of `job` reported `delivered` more elements, `wait_us` more waiting and `step_us`
  // more stepping, at `now_us`.
  void AddDelivered(int64_t job, int64_t delivered, int64_t wait_us, int64_t step_us,
                    uint64_t now_us);
  // A worker heartbeat's report of `task`: its runner's produced count and last transport.
  void TaskReport(int64_t task, int64_t produced, const std::string& transport);
  void ForgetTask(int64_t task);
  void Forget(int64_t job);

  // Every tracked job's activity at `now_us`, by job id.
  std::vector<JobActivity> Jobs(uint64_t now_us) const;
  // `task`'s produced count and transport (zero and empty when unreported) in `activity`.
  void FillTask(int64_t task, TaskActivity* activity) const;

 private:
  struct Sample {
    uint64_t at_us;
    int64_t delivered, wait_us;
  };
  struct Job {
    int64_t delivered = 0, wait_us = 0, step_us = 0;
    // Cumulative (delivered, wait) after each report in the window, oldest first.
    std::deque<Sample> recent;
  };
  struct Task {
    int64_t produced = 0;
    std::string transport;
  };
  std::map<int64_t, Job> jobs_;
  std::map<int64_t, Task> tasks_;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_JOB_ACTIVITY_H_
