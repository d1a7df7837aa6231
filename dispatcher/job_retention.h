// JobRetention: retires idle jobs so that the state and the cost of every RPC stay bounded in a
// long-running service. It keeps when a client last asked about each job (opened it, started
// an epoch of it, heartbeated for it, scaled it; not journaled — after a restart, the restart's
// time) and proposes RetireJobUpdate to the core (dispatcher_core.h) for every job idle past
// the retention period whose started epochs are all finished; the state refuses it for a job
// that started a new epoch meanwhile.
//
// Thread-safe. Its lock is a leaf: taken under the core's and the dispatcher's, never the
// other way; the OnRetired hook runs without it.
#ifndef GRANARY_DISPATCHER_JOB_RETENTION_H_
#define GRANARY_DISPATCHER_JOB_RETENTION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "dispatcher/dispatcher_core.h"

namespace granary {

class JobRetention {
 public:
  // Called, under the core's lock, for a job just retired with the ids of its tasks: what is
  // kept about them beside the state goes too.
  using OnRetired = std::function<void(int64_t job_id, const std::vector<int64_t>& task_ids)>;

  // `core` must outlive this; a job is idle once no client asked about it for `retention_ms`.
  JobRetention(DispatcherCore* core, Env* env, int64_t retention_ms, OnRetired on_retired);

  // Every job of `state` counts as asked about now.
  void MarkAllActive(const DispatcherState& state) ABSL_LOCKS_EXCLUDED(mu_);
  // A client asked about `job_id` now.
  void MarkActive(int64_t job_id) ABSL_LOCKS_EXCLUDED(mu_);
  // When a client last asked about `job_id` (Env::NowMicros); nullopt if none did since the job
  // was retired or never was known to this process.
  std::optional<uint64_t> LastActive(int64_t job_id) const ABSL_LOCKS_EXCLUDED(mu_);

  // Proposes RetireJob for every job idle past the retention period whose epochs are all
  // finished. Unavailable once the core stopped.
  absl::Status RetireIdleJobs() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  DispatcherCore* const core_;
  Env* const env_;
  const int64_t retention_ms_;
  const OnRetired on_retired_;

  mutable absl::Mutex mu_;
  // Job id -> when a client last asked about it (Env::NowMicros).
  std::map<int64_t, uint64_t> last_active_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_JOB_RETENTION_H_
