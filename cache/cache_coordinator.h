// CacheCoordinator: the dispatcher's cache decisions (DESIGN.md §5, cache/FORMAT.md), in the
// spirit of tf.data's SnapshotManager. It owns no durable state of its own: it decides and
// proposes updates through the dispatcher core (dispatcher/dispatcher_core.h) and reads the
// caches, epochs and jobs there.
//
// What it does:
// - Decides how an epoch uses its job's cache (DecideEpochCache): PUT when no cache with the
//   job's key exists (the tasks run the pipeline with cache_write inserted and report their
//   chunks), GET when it is complete (the tasks run cache_read over its chunks, one split per
//   chunk), else COMPUTE (another epoch is writing it, or it is invalid).
// - Checks the chunks a task finishing a PUT epoch reports (CheckTaskChunks); once the last one
//   completes the cache (a journaled TaskFinished), deletes its stray chunks and evicts over
//   capacity (AfterCacheComplete).
// - cache_policy auto: asks a worker, through its heartbeats, to profile the pipeline
//   (AddProfileRequests), decides from its report where the job caches (ReportCacheProfile,
//   cache/cache_planner.h), making room by evicting the least recently used caches no epoch
//   reads, or decides compute once no profile came in time (DecideOverdue). The job's first
//   StartEpoch waits for the decision (AwaitDecision), answering Unavailable, which clients
//   retry; every epoch then decides as at_mark does at the decided point.
// - A chunk that failed its check on a worker: invalidates the cache and answers how to
//   recompute the chunk (RecomputeChunk).
// - The cache root: its owner file (cache/FORMAT.md, "The cache root's owner") and the garbage
//   collection at start (cache/cache_gc.h).
// - Its /metrics: caches by state, bytes, capacity, evictions.
//
// Lock order: the core's lock before mu_ (AddProfileRequests and the UnreadTasks hook run under
// the core's lock). Thread-safe.
#ifndef GRANARY_CACHE_CACHE_COORDINATOR_H_
#define GRANARY_CACHE_CACHE_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/cache_planner.h"
#include "common/env.h"
#include "dispatcher/dispatcher_core.h"
#include "dispatcher/dispatcher_state.h"
#include "obs/metrics.h"
#include "proto/dispatcher.pb.h"

namespace granary {

struct CacheCoordinatorOptions {
  Env* env = Env::Default();
  // DispatcherOptions' cache fields (dispatcher/dispatcher_impl.h).
  std::string cache_root;
  int64_t cache_capacity_bytes = 0;
  int64_t cache_profile_records = 64;
  int64_t cache_profile_timeout_ms = 60 * 1000;
  int64_t cache_wait_ms = 2000;
  // The data roots, joined: part of every cache key (a cache of other files is another cache).
  std::string data_roots_key;
};

class CacheCoordinator {
 public:
  // The finished tasks whose consumers have not read them to their end (their epochs' caches
  // count as in use: such a task is run again if its worker is lost). Called under the core's
  // lock.
  using UnreadTasks = std::function<std::set<int64_t>()>;

  // `core` must outlive the coordinator.
  CacheCoordinator(DispatcherCore* core, CacheCoordinatorOptions options, UnreadTasks unread);

  // InvalidArgument unless `def` is free of what the cache inserts itself (the cache_write op,
  // the cache_read source, cached_ops): the only place that names those ops.
  static absl::Status CheckNoCacheOps(const PipelineDef& def);

  // For a dispatcher opening a new (empty) journal, named `journal_name` ("journal DIR"), unless
  // the operator asked for a new cluster: FailedPrecondition if the cache root's owner file
  // names a cluster (that cluster's journal seems lost), naming the journal, the evidence and
  // --new_cluster. Unreadable evidence is logged, not refused.
  absl::Status CheckRootUnowned(const std::string& journal_name) const;
  // Makes the cache root's owner file name the state's cluster, then deletes what no cache of
  // the state holds (failures are logged).
  void ClaimRootAndCollectGarbage() const;

  // How the next epoch of `job` (with pipeline `def`) uses its cache, given the caches known
  // in `state`.
  absl::StatusOr<EpochCache> DecideEpochCache(const DispatcherState& state, const JobState& job,
                                              const PipelineDef& def) const;
  // Whether `cache`, which an epoch of `job_id` would compute past, is being written by an
  // earlier epoch of that job.
  static bool OwnPutRunning(const DispatcherState& state, int64_t job_id, const EpochCache& cache);
  // Waits (up to cache_wait_ms) until cache `cache_key` is complete or gone.
  void AwaitCacheWritten(const std::string& cache_key) const;

  // OK, or InvalidArgument naming the chunk: a task of a PUT epoch (`put`) must report chunks
  // in `cache_dir` covering its elements at the cache point 0, 1, 2, ... without gap or overlap
  // — all of them when the cache point is the pipeline's end (`whole_output`); any other task
  // none.
  static absl::Status CheckTaskChunks(const TaskFinishedRequest& request, bool put,
                                      bool whole_output, const std::string& cache_dir);
  // After a Put epoch completed cache `cache_key`: deletes its stray chunks and, if the caches
  // now exceed cache_capacity_bytes, evicts the least recently used ones no epoch reads — none
  // if even evicting all of those would not bring them under it.
  absl::Status AfterCacheComplete(const std::string& cache_key) ABSL_LOCKS_EXCLUDED(mu_);
  // A chunk of the cache task `request.task_id()` reads failed its check: journals the cache
  // invalid (later epochs compute its prefix) and answers how to recompute the chunk.
  absl::Status RecomputeChunk(const RecomputeCacheChunkRequest& request,
                              RecomputeCacheChunkResponse* response);

  // From now on the heartbeats ask a worker to profile cache_policy auto job `job_id`, until it
  // is decided (the first ask's time starts cache_profile_timeout_ms).
  void AskForProfile(int64_t job_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Asks for a profile and waits a little for the decision of cache_policy auto job `job_id`.
  // OK once decided (or the job is gone), Unavailable (retry) until then.
  absl::Status AwaitDecision(int64_t job_id) ABSL_LOCKS_EXCLUDED(mu_);
  // The profile requests for `worker`'s heartbeat: each waiting job's, for the worker it was
  // given to — this one if none, or if that one is lost. Called under the core's lock.
  void AddProfileRequests(const DispatcherState& state, const WorkerState& worker,
                          WorkerHeartbeatResponse* response) ABSL_LOCKS_EXCLUDED(mu_);
  // A worker's profile (or why it could not take one): decides, evicts what the decision needs
  // room from, journals, and answers the job's decision — the one already journaled, if
  // another report came first. FailedPrecondition for a job without cache_policy auto.
  absl::Status ReportCacheProfile(const ReportCacheProfileRequest& request,
                                  ReportCacheProfileResponse* response) ABSL_LOCKS_EXCLUDED(mu_);
  // Journals a compute decision for every job that has waited for a profile longer than
  // cache_profile_timeout_ms.
  absl::Status DecideOverdue() ABSL_LOCKS_EXCLUDED(mu_);

  // The caches' series for /metrics (granary_cache_*), from `state`.
  void CollectMetrics(const DispatcherState& state, MetricSamples& out) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::string CacheKeyOf(const PipelineDef& def, int cache_point, uint64_t seed) const;
  std::string CacheDir(const std::string& cache_key) const;
  std::string RootOwnerFile() const;
  // Every cache as eviction sees it. Called under the core's lock.
  std::vector<CacheUsage> CacheUsages(const DispatcherState& state) const;
  // Journals the eviction of each of `cache_keys` (one refused because it came into use is
  // kept), then deletes the evicted caches' directories.
  absl::Status Evict(const std::vector<std::string>& cache_keys, const std::string& reason)
      ABSL_LOCKS_EXCLUDED(mu_);

  DispatcherCore* const core_;
  const CacheCoordinatorOptions options_;
  const UnreadTasks unread_;

  mutable absl::Mutex mu_;
  // cache_policy auto jobs waiting for a profile, by job id: since when, and the worker asked
  // (not journaled: a restarted dispatcher asks again).
  struct ProfileWait {
    uint64_t since_us = 0;
    std::string worker_id;
  };
  std::map<int64_t, ProfileWait> profile_waits_ ABSL_GUARDED_BY(mu_);
  // Caches evicted by this process (not journaled), for /metrics.
  int64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_COORDINATOR_H_
