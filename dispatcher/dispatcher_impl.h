// DispatcherImpl: the dispatcher's service logic, in plain C++ (the gRPC adapter in
// grpc_dispatcher_service.h only translates).
//
// Protocol (DESIGN.md §3). Every RPC that changes durable state builds an Update (a command,
// see proto/journal.proto), appends it to the journal — which group-commits concurrent appends
// into one synced RocksDB write — and only once it is durable applies it to DispatcherState, in
// sequence-number order, and answers from the state it produced. An acknowledged change is
// therefore never lost: a restarted dispatcher loads the newest snapshot, replays the records
// after it, and is in the state it had. Read-only questions (a lease already made, a heartbeat)
// are answered from the state without journaling. Every `snapshot_every` records the full state
// is serialized under the lock and written as a snapshot outside it, and older records are
// dropped, bounding restart time.
//
// If the journal fails, the dispatcher stops changing state and answers Unavailable until it is
// restarted (fail-stop): its memory may no longer match what is durable. Except on a full disk:
// an update the journal refuses with Unavailable was not written, so it is not applied, the RPC
// answers Unavailable, reads go on, and updates work again once space is freed (a snapshot
// refused that way is retried after the next record). Should the journal find such a record
// durable after all, it fails the next write and the dispatcher stops as above.
//
// Caching jobs (JobOptions.cache_policy): when an epoch starts, the dispatcher decides how it
// uses the job's cache — PUT (no cache with the job's key yet: the tasks run the pipeline with
// cache_write inserted and report the chunks they committed), GET (the cache is complete: the
// tasks run cache_read over the manifest's chunks, one split per chunk, then the ops after the
// cache point) or COMPUTE (another epoch is writing it) — and journals the decision with the
// epoch. The TaskFinished that finishes a PUT epoch's last task makes the cache complete, its
// manifest the tasks' chunks; like everything else, it survives a dispatcher restart. Its stray
// chunks (of runs that lost their task) are then deleted, and a restarted dispatcher collects
// the cache root's garbage (cache/cache_gc.h).
//
// cache_policy auto (dispatcher_cache.cc): from the job's creation (or opening, after a
// restart) a worker is asked through its heartbeat to profile the pipeline; the job's first
// StartEpoch waits — answering Unavailable, which clients retry — until the worker has answered
// with ReportCacheProfile and the dispatcher has journaled where the
// job caches (cache/cache_planner.h), making room by evicting least recently used caches no
// epoch reads (--cache_capacity_bytes); every epoch then decides as at_mark does at that point.
//
// Liveness is not journaled: the failure detector (CheckLiveness, run by a background thread)
// declares a worker silent for `worker_timeout_ms` lost by journaling WorkerLost, which
// reassigns its tasks. After a restart every known worker counts as freshly seen.
//
// Thread-safe.
#ifndef GRANARY_DISPATCHER_DISPATCHER_IMPL_H_
#define GRANARY_DISPATCHER_DISPATCHER_IMPL_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "cache/cache_planner.h"
#include "common/env.h"
#include "dispatcher/caller.h"
#include "dispatcher/dispatcher_state.h"
#include "dispatcher/job_activity.h"
#include "dispatcher/job_metrics_collector.h"
#include "dispatcher/policy/job_metrics.h"
#include "dispatcher/policy/resource_policy.h"
#include "dispatcher/provisioner.h"
#include "dispatcher/request_limits.h"
#include "journal/journal.h"
#include "ops/metrics.h"
#include "pipeline/core/udf.h"
#include "proto/dispatcher.pb.h"
#include "security/capability.h"
#include "security/confined_env.h"

namespace granary {

struct DispatcherOptions {
  std::string journal_dir;
  // Write a full state snapshot every this many journal records.
  int64_t snapshot_every = 10000;
  // A worker not heard from for this long is declared lost.
  int64_t worker_timeout_ms = 5000;
  // A job whose every started epoch is finished and that no client has asked about (opened,
  // started an epoch of, heartbeated for) for this long is retired: removed with its epochs
  // and tasks, so that the state and the cost of every RPC stay bounded in a long-running
  // service. A client opening its name afterwards gets a new job.
  int64_t job_retention_ms = 10 * 60 * 1000;
  Env* env = Env::Default();
  // Validates pipelines at registration and enumerates their splits. Must outlive the impl.
  const UdfRegistry* udfs = nullptr;
  // Where the journal counts its appends and commits (JournalOptions.metrics); nullptr:
  // nowhere. Must outlive the impl. (The dispatcher's own metrics are CollectMetrics'.)
  MetricRegistry* metrics = nullptr;
  // Where caching jobs' caches live (DESIGN.md §5): <cache_root>/<cache key>/ holds a cache's
  // chunks. Workers write and read these paths, so in a cluster it must be a filesystem every
  // worker mounts at the same path. Empty: jobs with a cache policy are refused.
  std::string cache_root;
  // The most bytes the caches under cache_root may take (0: no limit). A cache_policy auto job
  // caches only where its estimated cache fits once the least recently used caches no epoch
  // reads are evicted; a completed cache that overflows it evicts such caches too.
  int64_t cache_capacity_bytes = 0;
  // cache_policy auto: the source records a worker profiles the pipeline on
  // (cache/cache_profiler.h), and how long a job waits for a profile before it computes.
  int64_t cache_profile_records = 64;
  int64_t cache_profile_timeout_ms = 60 * 1000;
  // How long one StartEpoch waits for such a job's decision (then answers Unavailable), or for
  // the job's own earlier epoch to complete the cache it writes (then computes): the trainer
  // may have read that epoch to its end before its tasks' TaskFinished, which completes the
  // cache, arrived.
  int64_t cache_wait_ms = 2000;
  // Where pipelines' file sources may read (security/data_roots.h): with a value, globs are
  // expanded and files listed only inside these roots (and cache_root), so a pipeline naming
  // a file elsewhere is refused at RegisterDataset (PermissionDenied naming the path); none:
  // anywhere `env` reaches (in-process use and tests).
  std::optional<DataRoots> data_roots;
  // The key of the capabilities handed to readers with their tasks and to workers at
  // registration and heartbeat (security/capability.h); none: no capabilities.
  std::optional<CapabilityKey> capability_key;
  // The operators' clients (`--admin_clients`): GetStatus shows them the whole state, and
  // workers (told at registration and heartbeat) every task in GetWorkerStatus.
  std::vector<std::string> admin_clients;
  ClientLimits limits;
  // Checks the state invariants (state_invariants.h) after every applied record and aborts the
  // process on a violation. For tests: the check walks the whole state.
  bool check_invariants = false;
  // How often jobs with an autoscale or placement policy are measured and decided on (issue 17).
  int64_t policy_period_ms = 2000;
  // What a remote worker and the trainer cost, for placement policies (Pecan's defaults).
  Prices prices;
  // Start a new, empty cluster although the evidence says an existing cluster's journal was
  // lost (see Open). Only for an operator who means it (`granary dispatcher --new_cluster`).
  bool new_cluster = false;
};

class DispatcherImpl {
 public:
  // Opens the journal and recovers the state from it. DataLoss names a corrupt journal record
  // or a recovered state that breaks an invariant (state_invariants.h);
  // FailedPrecondition a journal directory in use by another dispatcher, or — unless
  // options.new_cluster — the evidence that the journal of an existing cluster was lost: the
  // journal directory holds the lost-journal marker (journal/journal.h, "Deleted under it"),
  // or the journal is new (empty) while the cache root's owner file names a cluster
  // (cache/FORMAT.md, "The cache root's owner"). The message names the evidence and the flag.
  // A dispatcher with a cache root makes its owner file name its own cluster.
  static absl::StatusOr<std::unique_ptr<DispatcherImpl>> Open(const DispatcherOptions& options);
  ~DispatcherImpl();

  absl::Status RegisterDataset(const RegisterDatasetRequest& request,
                               RegisterDatasetResponse* response);
  // The job-facing client RPCs check CheckJobAccess (caller.h) for `caller`; a job created by
  // GetOrCreateJob is owned by caller.owner().
  absl::Status GetOrCreateJob(const GetOrCreateJobRequest& request,
                              GetOrCreateJobResponse* response, const Caller& caller = {});
  absl::Status StartEpoch(const StartEpochRequest& request, StartEpochResponse* response,
                          const Caller& caller = {});
  // A worker (re)registering: same id and address is a restart (a new incarnation); the same id
  // at another address while the registered worker is live (not lost, heard from within
  // worker_timeout_ms) is a second process started with that --worker_id, refused with
  // AlreadyExists naming the id and both addresses (logged, and counted in /metrics) so that the
  // two do not take the id from each other at every heartbeat. Once the registered one has been
  // silent for worker_timeout_ms, a worker restarted at a new address is accepted.
  absl::Status RegisterWorker(const RegisterWorkerRequest& request,
                              RegisterWorkerResponse* response);
  absl::Status WorkerHeartbeat(const WorkerHeartbeatRequest& request,
                               WorkerHeartbeatResponse* response);
  absl::Status ClientHeartbeat(const ClientHeartbeatRequest& request,
                               ClientHeartbeatResponse* response, const Caller& caller = {});
  absl::Status GetSplits(const GetSplitsRequest& request, GetSplitsResponse* response);
  // Journals ScaleJobUpdate for the job (by id, or by name when job_id is 0) after checking
  // `caller` may access it and the count is in range.
  absl::Status ScaleJob(const ScaleJobRequest& request, ScaleJobResponse* response,
                        const Caller& caller = {});
  // The id of the worker task `task_id` is assigned to ("" if none); NotFound for no such task.
  absl::StatusOr<std::string> TaskWorker(int64_t task_id) const;
  // DispatcherOptions.admin_clients.
  const std::vector<std::string>& admin_clients() const { return options_.admin_clients; }
  absl::Status TaskFinished(const TaskFinishedRequest& request, TaskFinishedResponse* response);
  // A chunk of the cache task `request.task_id()` reads failed its check on the worker: journals
  // the cache invalid (later epochs compute its prefix) and answers how to recompute the chunk.
  absl::Status RecomputeCacheChunk(const RecomputeCacheChunkRequest& request,
                                   RecomputeCacheChunkResponse* response);
  // A worker's profile of a cache_policy auto job (or why it could not take one): decides,
  // evicts what the decision needs room from, journals, and answers the job's decision — the
  // one already journaled, if another report came first. FailedPrecondition for a job without
  // cache_policy auto.
  absl::Status ReportCacheProfile(const ReportCacheProfileRequest& request,
                                  ReportCacheProfileResponse* response) ABSL_LOCKS_EXCLUDED(mu_);
  // Journals a compute decision for every cache_policy auto job that has waited for a profile
  // longer than cache_profile_timeout_ms. Also run by the background thread.
  absl::Status DecideOverdueCaches() ABSL_LOCKS_EXCLUDED(mu_);
  // The state `caller` may see (VisibleState, caller.h) and the live workers.
  // With request.summary(), what grows with the data is left out (GetStatusRequest).
  absl::Status GetStatus(const GetStatusRequest& request, GetStatusResponse* response,
                         const Caller& caller = {});
  // For /metrics (dispatcher/dispatcher_metrics.cc): workers by state, jobs' delivery and the
  // trainers' wait, epochs and tasks, tasks moved, caches, the policies' decisions and targets,
  // and the journal's head — computed from the state under the lock at each scrape. A job's
  // series (granary_job_*) are left out once it is over (JobOver), so they do not pile up with
  // every job ever run; a retired job's are gone for good.
  void CollectMetrics(MetricSamples& out) const ABSL_LOCKS_EXCLUDED(mu_);

  // One pass of the resource policies: for each job with JobOptions.autoscale or placement
  // whose running epoch still hands out splits, its metrics since the last pass go to its
  // policy, and a decision becomes a journaled scaling step (ScaleJobUpdate, the decision's reason
  // with it). Also run every policy_period_ms by the background thread.
  absl::Status RunPolicies() ABSL_LOCKS_EXCLUDED(mu_);

  // Gives the dispatcher a provisioner (provisioner.h) that keeps between `min_workers` and
  // `max_workers` remote workers, as many as the jobs' tasks want; placement policies then
  // count on max_workers remote workers (without a provisioner: on the live ones).
  void SetProvisioner(std::unique_ptr<Provisioner> provisioner, int32_t min_workers,
                      int32_t max_workers) ABSL_LOCKS_EXCLUDED(mu_);
  // One pass of provisioning: asks the provisioner for the workers the jobs want, if that
  // changed. Also run by the background thread, which must be the only caller (the local
  // provisioner's workers belong to the thread that starts them).
  void Provision() ABSL_LOCKS_EXCLUDED(mu_);

  // One pass of the failure detector: journals WorkerLost for every live worker silent for
  // longer than the timeout. Also run every timeout/4 by a background thread started by Open.
  absl::Status CheckLiveness();
  // Journals RetireJob for every job idle past job_retention_ms whose epochs are all finished.
  // Also run by the background thread.
  absl::Status RetireIdleJobs();

 private:
  // Called under mu_ right after the update is applied, with Apply's status.
  using Answer = std::function<absl::Status(const absl::Status& apply_status)>;

  DispatcherImpl(const DispatcherOptions& options, std::unique_ptr<Journal> journal);
  absl::Status Recover();
  // Journals a random cluster id if the recovered state has none (a new journal).
  absl::Status NameCluster();
  // The cache root's owner file (cache/FORMAT.md).
  std::string CacheRootOwnerFile() const;
  // FailedPrecondition if the cache root's owner file names a cluster (called for a new,
  // empty journal: that cluster's journal seems lost). Unreadable evidence is logged, not
  // refused.
  absl::Status CheckCacheRootUnowned();
  // Makes the cache root's owner file name this dispatcher's cluster (a failure is logged).
  void ClaimCacheRoot() ABSL_LOCKS_EXCLUDED(mu_);
  // Journals `update`, waits until it is durable and every earlier record is applied, applies
  // it and returns answer(apply status) — all of the last three under mu_.
  absl::Status JournalAndApply(const Update& update, const Answer& answer) ABSL_LOCKS_EXCLUDED(mu_);
  // A serialized state, to be written as the journal snapshot at `seq`.
  struct Snapshot {
    uint64_t seq;
    std::string bytes;
  };
  // Every snapshot_every records (unless a snapshot is being written): the state, serialized
  // under the lock.
  std::optional<Snapshot> SnapshotIfDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes it to the journal, outside the lock; a failure stops the dispatcher like a failed
  // append.
  absl::Status WriteSnapshot(const Snapshot& snapshot) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CheckUsable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // For options_.check_invariants: aborts, naming record `seq`, if the state is inconsistent.
  void CheckInvariantsOrDie(uint64_t seq) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `job`'s work is over at `now`: every epoch it started is finished and read to its
  // end, and it started all its num_epochs or no client asked about it (last_active_) for
  // JobActivityTracker::kWindowUs, over which its rates have decayed to 0. A trainer that comes
  // back to it makes it not over again.
  bool JobOver(const JobState& job, uint64_t now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // AlreadyExists (logged and counted) when `request`'s worker id is registered at another
  // address by a worker that is live at `now` (RegisterWorker); else OK.
  absl::Status RefuseDuplicateWorker(const RegisterWorkerRequest& request, uint64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job named `name` that `caller` means (names are per owner). With `owner` empty or the
  // caller's own: the caller's own job of that name, or nullptr when it has none (an
  // unauthenticated caller's own jobs are the unowned ones). With another owner: that owner's
  // job of that name — NotFound naming name and owner when it has none, PermissionDenied
  // (CheckJobAccess) unless its ACL names the caller. A name never resolves to another owner's
  // job unless the caller names that owner, so no ACL can put a job in another's namespace.
  absl::StatusOr<const JobState*> FindNamedJob(const std::string& name, const std::string& owner,
                                               const Caller& caller) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records that a client asked about `job_id` now (last_active_).
  void MarkActive(int64_t job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lists or unlists the finished `task` in unread_finished_, by consumed_.
  void TrackUnread(const TaskState& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills `def` but for its pipeline, which it returns (def->pipeline_key names it).
  const PipelineDef& FillTaskDef(const TaskState& task, TaskDef* def) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK unless creating a job with `options` would take `caller` beyond options_.limits
  // (ResourceExhausted naming the flag).
  absl::Status CheckClientLimits(const Caller& caller, const JobOptions& options) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How epoch `epoch` of `job` uses its cache, given the caches known now.
  absl::StatusOr<EpochCache> DecideEpochCache(const JobState& job, const PipelineDef& def) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The key of the cache of `def`'s first `cache_point` ops with `seed`, for these data roots.
  std::string CacheKeyOf(const PipelineDef& def, int cache_point, uint64_t seed) const;
  std::string CacheDir(const std::string& cache_key) const;
  // From now on the heartbeats ask a worker to profile cache_policy auto job `job_id`, until it
  // is decided (the first ask's time starts cache_profile_timeout_ms).
  void AskForProfile(int64_t job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // cache_policy auto job `job_id` has no decision: asks for a profile and waits a little for
  // the decision, releasing mu_ meanwhile. OK once decided (or the job is gone), Unavailable
  // (retry) until then.
  absl::Status AwaitCacheDecision(int64_t job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `cache`, which an epoch of `job_id` would compute past, is being written by an
  // earlier epoch of that job; if so, waits (up to cache_wait_ms, releasing mu_) until the cache
  // is complete or gone, so the caller decides again.
  bool AwaitOwnPut(int64_t job_id, const EpochCache& cache) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The profile requests for `worker`'s heartbeat: each waiting job's, for the worker it was
  // given to — this one if none, or if that one is lost.
  void AddCacheProfileRequests(const WorkerState& worker, WorkerHeartbeatResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every cache as eviction sees it.
  std::vector<CacheUsage> CacheUsages() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Journals the eviction of each of `cache_keys` (one refused because it came into use is
  // kept), then deletes the evicted caches' directories.
  absl::Status Evict(const std::vector<std::string>& cache_keys, const std::string& reason)
      ABSL_LOCKS_EXCLUDED(mu_);
  // After a Put epoch completed cache `cache_key`: deletes its stray chunks and, if the caches
  // now exceed cache_capacity_bytes, evicts the least recently used ones no epoch reads — none
  // if even evicting all of those would not bring them under it (the caches in use alone
  // overflow; the next completion tries again).
  absl::Status AfterCacheComplete(const std::string& cache_key) ABSL_LOCKS_EXCLUDED(mu_);
  // The policy JobOptions.autoscale or .placement names for `job`, sized by the workers live now.
  std::unique_ptr<ResourcePolicy> NewPolicy(const JobState& job) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LivenessLoop();

  const DispatcherOptions options_;
  const std::unique_ptr<Journal> journal_;
  // The Env pipelines' sources are listed through: options_.env, confined to
  // options_.data_roots when it has a value.
  const std::unique_ptr<ConfinedEnv> confined_env_;
  Env* const source_env_;

  mutable absl::Mutex mu_;
  DispatcherState state_ ABSL_GUARDED_BY(mu_);
  // Set when a journal write failed: the dispatcher refuses to go on (fail-stop).
  absl::Status journal_failure_ ABSL_GUARDED_BY(mu_);
  int64_t records_since_snapshot_ ABSL_GUARDED_BY(mu_) = 0;
  // Set while a snapshot is written outside the lock: one at a time, in order.
  bool snapshot_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  // Worker id -> when it was last heard from (Env::NowMicros).
  std::map<std::string, uint64_t> last_seen_ ABSL_GUARDED_BY(mu_);
  // Task id -> the next index its consumer needs, from its latest client heartbeat (lower than
  // before when the consumer resumed from an older saved position).
  std::map<int64_t, int64_t> consumed_ ABSL_GUARDED_BY(mu_);
  // The trainers' and workers' heartbeat counters per job, and each autoscaled job's policy
  // (not journaled: its decisions are; a restarted dispatcher measures and decides afresh).
  JobMetricsCollector metrics_ ABSL_GUARDED_BY(mu_);
  // The same heartbeats as the status page and /metrics show them.
  JobActivityTracker activity_ ABSL_GUARDED_BY(mu_);
  // Counted for /metrics since this process started (not journaled).
  struct Counters {
    // Epochs started, by EpochCache::Mode (COMPUTE, PUT, GET).
    int64_t epochs_started[3] = {0, 0, 0};
    int64_t cache_evictions = 0;
    // RegisterWorker calls refused: the id is live at another address (RegisterWorker).
    int64_t duplicate_workers_refused = 0;
    // DispatcherState::task_moves() once the journal was replayed.
    int64_t task_moves_at_open = 0;
  };
  Counters counters_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::unique_ptr<ResourcePolicy>> policies_ ABSL_GUARDED_BY(mu_);
  // Jobs scaled in the last policy pass: their next period is skipped.
  std::set<int64_t> settling_ ABSL_GUARDED_BY(mu_);
  // The finished tasks whose consumer has not read to their end: their workers still serve
  // them (listed in worker heartbeats with the unfinished ones). A finished task whose consumer
  // has read to its end is no longer listed to its worker; listed again (its consumer resumed
  // from an older position), the worker recomputes it. Not journaled: after a restart every
  // finished task is listed until its consumer reports again or its job is retired.
  std::set<int64_t> unread_finished_ ABSL_GUARDED_BY(mu_);
  // Job id -> when a client last asked about it (Env::NowMicros); after a restart, the
  // restart's time.
  std::map<int64_t, uint64_t> last_active_ ABSL_GUARDED_BY(mu_);
  // cache_policy auto jobs waiting for a profile, by job id: since when, and the worker asked
  // (not journaled: a restarted dispatcher asks again).
  struct ProfileWait {
    uint64_t since_us = 0;
    std::string worker_id;
  };
  std::map<int64_t, ProfileWait> profile_waits_ ABSL_GUARDED_BY(mu_);

  // Provisioning (SetProvisioner; Provision).
  std::unique_ptr<Provisioner> provisioner_ ABSL_GUARDED_BY(mu_);
  int32_t min_workers_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t max_workers_ ABSL_GUARDED_BY(mu_) = 0;
  // The count last granted (-1: none yet), the last request's outcome and time, and since when
  // the wanted count has been below the granted one.
  int32_t requested_workers_ ABSL_GUARDED_BY(mu_) = -1;
  // The count of the Resize in flight (-1: none), for GetStatus.
  int32_t asking_workers_ ABSL_GUARDED_BY(mu_) = -1;
  // What status and metrics show as requested: the count in flight, else the last granted (0
  // before any).
  int32_t ShownRequestedWorkers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::max(asking_workers_ >= 0 ? asking_workers_ : requested_workers_, 0);
  }
  absl::Status provisioning_ ABSL_GUARDED_BY(mu_);
  uint64_t last_provision_us_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t lower_since_us_ ABSL_GUARDED_BY(mu_) = 0;

  absl::Notification stopping_;
  std::thread liveness_thread_;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_DISPATCHER_IMPL_H_
