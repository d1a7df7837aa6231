// WorkerProvisioning: keeps the remote workers the jobs want through a Provisioner
// (provisioner.h) — between a minimum and a maximum, a worker for every unfinished remote task
// of an unfinished epoch. It reads the state through the dispatcher core (dispatcher_core.h)
// and journals nothing: the workers it starts register themselves.
//
// Growing is asked for at once; shrinking once the wanted count has stayed lower for three
// periods (an epoch's end and the next one's start are moments apart), naming the idle workers
// (no unfinished task, no finished one its consumer still reads) the provisioner may stop; a
// failed request is retried after a period.
//
// Thread-safe. Lock order: the core's lock, then the UnreadTasks hook's, then mu_.
#ifndef GRANARY_DISPATCHER_WORKER_PROVISIONING_H_
#define GRANARY_DISPATCHER_WORKER_PROVISIONING_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "dispatcher/dispatcher_core.h"
#include "dispatcher/provisioner.h"
#include "obs/metrics.h"
#include "proto/dispatcher.pb.h"

namespace granary {

class WorkerProvisioning {
 public:
  // The finished tasks whose consumers still read them (their workers are not idle).
  using UnreadTasks = std::function<std::set<int64_t>()>;

  // `core` must outlive this; `period_ms` is DispatcherOptions.policy_period_ms.
  WorkerProvisioning(DispatcherCore* core, Env* env, int64_t period_ms, UnreadTasks unread);

  // Provisions through `provisioner` between `min_workers` and `max_workers` remote workers
  // from now on (replacing any earlier one).
  void Set(std::unique_ptr<Provisioner> provisioner, int32_t min_workers, int32_t max_workers)
      ABSL_LOCKS_EXCLUDED(mu_);
  // One pass: asks the provisioner for the workers the jobs want, if that changed. The
  // background thread must be the only caller (the local provisioner's workers belong to the
  // thread that starts them). Nothing after the core stopped.
  void Provision() ABSL_LOCKS_EXCLUDED(mu_);

  // The most remote workers the provisioner may start; nullopt without a provisioner.
  std::optional<int32_t> MaxWorkers() const ABSL_LOCKS_EXCLUDED(mu_);
  // GetStatus' provisioning line and desired workers (nothing without a provisioner).
  void FillStatus(GetStatusResponse* response) const ABSL_LOCKS_EXCLUDED(mu_);
  // granary_dispatcher_desired_workers (nothing without a provisioner).
  void CollectMetrics(MetricSamples& out) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What status and metrics show as requested: the count in flight, else the last granted (0
  // before any).
  int32_t ShownRequestedWorkers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::max(asking_workers_ >= 0 ? asking_workers_ : requested_workers_, 0);
  }

  DispatcherCore* const core_;
  Env* const env_;
  const int64_t period_ms_;
  const UnreadTasks unread_;

  mutable absl::Mutex mu_;
  std::unique_ptr<Provisioner> provisioner_ ABSL_GUARDED_BY(mu_);
  int32_t min_workers_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t max_workers_ ABSL_GUARDED_BY(mu_) = 0;
  // The count last granted (-1: none yet).
  int32_t requested_workers_ ABSL_GUARDED_BY(mu_) = -1;
  // The count of the Resize in flight (-1: none), for GetStatus.
  int32_t asking_workers_ ABSL_GUARDED_BY(mu_) = -1;
  // The last request's outcome and time, and since when the wanted count has been below the
  // granted one.
  absl::Status provisioning_ ABSL_GUARDED_BY(mu_);
  uint64_t last_provision_us_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t lower_since_us_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_WORKER_PROVISIONING_H_
