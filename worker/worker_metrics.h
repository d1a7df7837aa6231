// WorkerMetrics: the counters a worker's GetElements answers and task runners update for
// /metrics (granary_worker_*), per job. Gauges of the moment (tasks, windows) are collected at
// scrape time from WorkerImpl::GetStatus instead (WorkerImpl::CollectMetrics).
// Thread-safe.
#ifndef GRANARY_WORKER_WORKER_METRICS_H_
#define GRANARY_WORKER_WORKER_METRICS_H_

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "obs/metrics.h"

namespace granary {

class WorkerMetrics {
 public:
  // One job's counters. Pointers owned by the registry.
  struct Job {
    // Elements (and their bytes on the wire) sent to readers for the first time by this
    // process, and sent again (a reader asked again for what it was sent: a lost answer).
    Counter* served;
    Counter* served_bytes;
    Counter* resent;
    // Elements a runner made again to reach the index its reader needs (after a restore).
    Counter* recomputed;
    // Runners that resumed a task its reader had read part of: from a checkpoint, or from the
    // start (no usable checkpoint).
    Counter* restores_from_checkpoint;
    Counter* restores_from_start;
    Counter* checkpoints;
    Counter* checkpoint_bytes;
    Counter* checkpoint_stall_seconds;
  };

  // Must outlive this.
  explicit WorkerMetrics(MetricRegistry* registry) : registry_(registry) {}

  // The counters of `job_id`, created on first use; stable.
  const Job& ForJob(int64_t job_id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  MetricRegistry* const registry_;
  absl::Mutex mu_;
  std::map<int64_t, Job> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_WORKER_WORKER_METRICS_H_
