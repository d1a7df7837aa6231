// JobMetricsCollector: turns the cumulative counters trainers and workers send with their
// heartbeats into each job's metrics over a measurement period (issue 17), for the resource
// policies (dispatcher/policy/). A reader reports, since it started, the elements it delivered,
// the time its trainer waited in Next() and the time between Next() calls; a task runner the
// elements it made and the time it was busy making them. The collector keeps the last totals
// per reader and per runner and adds each report's increase to its job's period; Take() hands the
// period over and starts the next. Not journaled (metrics are not state): a restarted dispatcher
// starts measuring afresh. Thread-compatible (DispatcherImpl serializes access).
#ifndef GRANARY_DISPATCHER_JOB_METRICS_COLLECTOR_H_
#define GRANARY_DISPATCHER_JOB_METRICS_COLLECTOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "dispatcher/policy/job_metrics.h"

namespace granary {

class JobMetricsCollector {
 public:
  // What a reader's report added since its last one.
  struct ReaderIncrease {
    int64_t delivered, wait_us, step_us;
  };
  // Totals below the last ones come from a new reader (a new epoch) or runner (a new
  // generation): they count whole.
  ReaderIncrease ReaderTotals(int64_t job, int32_t consumer, int64_t delivered, int64_t wait_us,
                              int64_t step_us);
  // `local`: the runner is on a local worker (its rate is the job's local_worker_rate).
  void ProducerTotals(int64_t job, int64_t task, bool local, int64_t produced, int64_t busy_us);
  // The job's metrics since the last Take — per element: the trainer's wait and step, one
  // remote and one local producer's rate while busy (0 where none was) — with the worker counts
  // unset; nullopt (the period goes on) when fewer than `min_delivered` elements were delivered
  // or no producer was busy.
  std::optional<JobMetrics> Take(int64_t job, int64_t min_delivered);
  // Drops what is kept of a finished task, and of a retired job.
  void ForgetTask(int64_t job, int64_t task);
  void Forget(int64_t job);

 private:
  struct Totals {
    int64_t count = 0;
    int64_t a_us = 0;
    int64_t b_us = 0;
  };
  struct Period {
    int64_t delivered = 0, wait_us = 0, step_us = 0;
    // [0] remote runners, [1] local ones.
    int64_t produced[2] = {0, 0}, busy_us[2] = {0, 0};
  };
  // The increase from `last` to `now` (all of `now` when it is below: a new reader or runner).
  static Totals Increase(Totals& last, const Totals& now);

  std::map<std::pair<int64_t, int32_t>, Totals> readers_;    // (job, consumer)
  std::map<std::pair<int64_t, int64_t>, Totals> producers_;  // (job, task)
  std::map<int64_t, Period> periods_;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_JOB_METRICS_COLLECTOR_H_
