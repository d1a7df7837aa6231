// WorkerLiveness: the failure detector. It keeps when each worker was last heard from (its
// registration and heartbeats; not journaled) and declares a worker silent for longer than the
// timeout lost by proposing WorkerLost to the core (dispatcher_core.h), which reassigns its
// tasks. After a restart every known worker counts as freshly seen (SeeAll), so none is
// declared lost spuriously.
//
// Thread-safe. Its lock is a leaf: taken under the core's and the dispatcher's, never the
// other way.
#ifndef GRANARY_DISPATCHER_WORKER_LIVENESS_H_
#define GRANARY_DISPATCHER_WORKER_LIVENESS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "dispatcher/dispatcher_core.h"

namespace granary {

class WorkerLiveness {
 public:
  // `core` must outlive this; a worker silent for `timeout_ms` is lost.
  WorkerLiveness(DispatcherCore* core, Env* env, int64_t timeout_ms);

  // Every worker of `state` not lost counts as heard from now.
  void SeeAll(const DispatcherState& state) ABSL_LOCKS_EXCLUDED(mu_);
  // `worker_id` was heard from now.
  void Seen(const std::string& worker_id) ABSL_LOCKS_EXCLUDED(mu_);
  // When `worker_id` was last heard from (Env::NowMicros); nullopt if never by this process.
  std::optional<uint64_t> LastSeen(const std::string& worker_id) const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `worker_id` was heard from within the timeout before `now`.
  bool HeardWithin(const std::string& worker_id, uint64_t now) const ABSL_LOCKS_EXCLUDED(mu_);
  // The workers of `state` not lost and heard from within the timeout before `now`, by id.
  std::vector<std::string> LiveWorkers(const DispatcherState& state, uint64_t now) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // One pass of the failure detector: proposes WorkerLost for every live worker silent for
  // longer than the timeout (a worker that registered again meanwhile makes the state refuse
  // it). Unavailable once the core stopped.
  absl::Status CheckLiveness() ABSL_LOCKS_EXCLUDED(mu_);

  int64_t timeout_ms() const { return timeout_ms_; }

 private:
  bool HeardWithinLocked(const std::string& worker_id, uint64_t now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  DispatcherCore* const core_;
  Env* const env_;
  const int64_t timeout_ms_;

  mutable absl::Mutex mu_;
  // Worker id -> when it was last heard from (Env::NowMicros).
  std::map<std::string, uint64_t> last_seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_WORKER_LIVENESS_H_
