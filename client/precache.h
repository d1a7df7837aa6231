// The precache protocol behind Client::Precache (issue 20): fill a cache before training.
//
// Walkthrough. The precache job is a named job (PrecacheJobName: the dataset, the policy and
// the seed), so every attempt — the first, one after a kill, one by another process — works on
// the same job. Each round asks the dispatcher (GetOrCreateJob of that job, which is
// idempotent) which cache the job's next epoch would use and what it knows of it:
//  * complete: done (PrecacheResult.already_complete when it was so at the first look);
//  * invalid (a chunk failed its check): FailedPrecondition; the dispatcher computes such a
//    cache's prefix until it is evicted, then a Put remakes it;
//  * being written by an epoch of this job that this call has not read: read that epoch to its
//    end (a resumed precache: the reader starts at index 0 and the workers recompute or serve
//    what the epoch holds, exactly once as any epoch);
//  * being written by another job (or by an epoch this call read to its end, whose last
//    TaskFinished completes the cache a moment after): wait and ask again — and read this job's
//    epoch again once `reread_after` has passed without the cache completing: a task moved to
//    another generation after the reader had its last element (its worker declared lost just
//    then, its finished report refused) runs again only for a reader;
//  * unknown: the job's next epoch puts it — read that epoch to its end.
// Reading discards the elements: the point is the workers' Put of the cached prefix. Every
// round before `timeout` elapses; past it, DeadlineExceeded.
#ifndef GRANARY_CLIENT_PRECACHE_H_
#define GRANARY_CLIENT_PRECACHE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "granary/client.h"
#include "proto/dispatcher.pb.h"

namespace granary {

// "precache/<policy>/<seed>/<dataset id>".
std::string PrecacheJobName(const std::string& dataset_id, JobCachePolicy policy, uint64_t seed);

struct PrecacheCalls {
  // GetOrCreateJob of the precache job.
  std::function<absl::StatusOr<GetOrCreateJobResponse>()> look;
  // Starts (idempotently) and reads epoch `epoch` of the precache job (`job_id`, as `look`
  // answered) as its one consumer.
  std::function<absl::StatusOr<std::unique_ptr<EpochReader>>(int64_t job_id, int64_t epoch)>
      read_epoch;
};

absl::StatusOr<PrecacheResult> RunPrecache(const PrecacheCalls& calls, absl::Duration timeout,
                                           absl::Duration poll = absl::Milliseconds(100),
                                           absl::Duration reread_after = absl::Seconds(10));

}  // namespace granary

#endif  // GRANARY_CLIENT_PRECACHE_H_
