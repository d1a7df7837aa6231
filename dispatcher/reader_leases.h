// ReaderLeases: one reader per consumer (DESIGN.md §6). The leases themselves are journaled
// (JobState.leases, ClaimConsumerUpdate); this keeps when each holder was last heard from (its
// claim and its client heartbeats; not journaled, like worker liveness) and decides claims:
//  * a free consumer, or one the claiming reader holds already (a retried claim, also after a
//    dispatcher restart), is granted;
//  * one another reader holds is granted — as a takeover, which bumps the lease's generation and
//    so fences the old holder — when the claim says takeover, or when the holder has been silent
//    for longer than the timeout (its lease expired);
//  * else, while the holder has not been heard from since the claiming reader first asked, it
//    is refused with Unavailable saying when the lease expires: a client asks again (it
//    retries Unavailable), so a dead holder's consumer — a trainer restarted after a crash
//    claiming its own consumer — is granted at the expiry without anyone taking over;
//  * else (the holder heartbeats: it is live) it is refused with FailedPrecondition naming the
//    holder, how long it has been silent, when its lease expires, and how to take over — a
//    second live reader learns it within about a heartbeat interval of asking.
// After a restart every holder counts as heard from at recovery (SeeAll): silence is counted
// from then.
//
// Thread-safe. Its lock is a leaf: taken under the core's and the dispatcher's, never the
// other way.
#ifndef GRANARY_DISPATCHER_READER_LEASES_H_
#define GRANARY_DISPATCHER_READER_LEASES_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"
#include "dispatcher/dispatcher_core.h"
#include "proto/dispatcher.pb.h"

namespace granary {

class ReaderLeases {
 public:
  // `core` must outlive this; a holder silent for `timeout_ms` loses its lease to a claim.
  ReaderLeases(DispatcherCore* core, Env* env, int64_t timeout_ms);

  // Every holder of a lease in `state` counts as heard from now.
  void SeeAll(const DispatcherState& state) ABSL_LOCKS_EXCLUDED(mu_);

  // Claims `request.consumer()` of job `request.job_id()` for the reader (see the header
  // comment), journaling the claim; answers the lease's generation. Errors: FailedPrecondition
  // for a consumer a live other reader holds; Unavailable for one whose holder was not heard
  // from since the reader first asked (ask again) and when the core cannot journal; the state's
  // for a bad claim (InvalidArgument, NotFound).
  absl::Status Claim(const ClaimConsumerRequest& request, ClaimConsumerResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Journals the release of the consumer by the reader. FailedPrecondition if it does not hold it.
  absl::Status Release(const ReleaseConsumerRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  // A client heartbeat of reader `reader_id` for `consumer` of `job`: OK (and the holder is
  // heard from now) when the reader holds the consumer, or nobody ever claimed it (a reader
  // that does not claim); Aborted — the reader is fenced — naming the holder and its generation
  // when another reader holds it (the asking reader was taken over, or never held it), or it was
  // released.
  absl::Status CheckHolder(const JobState& job, int32_t consumer, const std::string& reader_id)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Job `job_id` was retired: its holders are forgotten.
  void Forget(int64_t job_id) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t timeout_ms() const { return timeout_ms_; }

 private:
  using Key = std::tuple<int64_t, int32_t, std::string>;  // (job, consumer, reader id)

  DispatcherCore* const core_;
  Env* const env_;
  const int64_t timeout_ms_;

  mutable absl::Mutex mu_;
  // Forgets first_asked_ entries older than twice the timeout (readers that gave up asking).
  void PruneAsked(uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // When each holder was last heard from (Env::NowMicros).
  std::map<Key, uint64_t> last_heard_ ABSL_GUARDED_BY(mu_);
  // When each reader whose claim is pending first asked (its key: the consumer it asks for).
  std::map<Key, uint64_t> first_asked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_READER_LEASES_H_
