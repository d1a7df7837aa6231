// DispatcherImpl: the dispatcher's service logic, in plain C++ (the gRPC adapter in
// grpc_dispatcher_service.h only translates).
//
// Protocol (DESIGN.md §3). The durable state, its journal, snapshots and fail-stop are the
// core's (dispatcher_core.h). Every RPC that changes durable state checks its request, builds
// an Update (a command, see proto/journal.proto), proposes it to the core — which refuses it
// before journaling if it would not apply, else journals and applies it — and answers from the
// state it produced. Read-only questions (a lease already made, a heartbeat) are answered from
// the state (DispatcherCore::Read) without journaling. After a journal failure the core refuses
// every change and the RPCs answer Unavailable until the dispatcher is restarted; on a full
// disk only the refused update's RPC does.
//
// Around the core, each concern is a class of its own that talks to the core only through
// Propose and Read: the cache coordinator (cache/cache_coordinator.h: how an epoch uses its
// job's cache, cache_policy auto's profiles and decisions, eviction, the cache root), the
// failure detector (worker_liveness.h), job retention (job_retention.h), the resource policies
// (policy_runner.h) and provisioning (worker_provisioning.h); a background thread runs their
// periodic passes. This class holds the RPC handlers (the worker-facing ones in
// worker_rpcs.cc), /metrics (dispatcher_metrics.cc) and what the heartbeats tell beside the
// state: the consumers' progress and the jobs' activity.
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
#include "cache/cache_coordinator.h"
#include "common/env.h"
#include "common/sync_ledger.h"
#include "dispatcher/caller.h"
#include "dispatcher/dispatcher_core.h"
#include "dispatcher/dispatcher_state.h"
#include "dispatcher/job_activity.h"
#include "dispatcher/job_retention.h"
#include "dispatcher/policy/job_metrics.h"
#include "dispatcher/policy/resource_policy.h"
#include "dispatcher/policy_runner.h"
#include "dispatcher/provisioner.h"
#include "dispatcher/reader_leases.h"
#include "dispatcher/request_limits.h"
#include "dispatcher/worker_liveness.h"
#include "dispatcher/worker_provisioning.h"
#include "obs/metrics.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/udf.h"
#include "proto/dispatcher.pb.h"
#include "security/capability.h"
#include "security/confined_env.h"

namespace rocksdb {
class FileSystem;
}  // namespace rocksdb

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
  // Validates pipelines at registration and enumerates their splits (PipelineSpec,
  // pipeline/spec/pipeline_spec.h): declarations are enough (cache/cache_op_declarations.h's
  // PipelineDeclarationsWithCache, plus --plugin UDFs). Must outlive the impl.
  const PipelineRegistries* registries = nullptr;
  // Where the journal counts its appends and commits (JournalOptions.metrics); nullptr:
  // nowhere. Must outlive the impl. (The dispatcher's own metrics are CollectMetrics'.)
  MetricRegistry* metrics = nullptr;
  // The file system of the journal's RocksDB files (JournalOptions.file_system); nullptr: the
  // default POSIX one. `granary dispatcher` gives a DiskFaultFileSystem when told to inject
  // disk faults (journal/disk_fault_fs.h).
  std::shared_ptr<rocksdb::FileSystem> journal_file_system;
  // Power-loss tests (`granary chaos`): the journal records its durability events in this
  // ledger (JournalOptions::sync_ledger). nullptr: none. Must outlive the impl.
  SyncLedger* sync_ledger = nullptr;
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
  // The clients that may register pipelines running Python functions on the workers
  // (`--python_udf_clients`; "*": every client); dispatcher/python_function_grant.h.
  std::vector<std::string> python_udf_clients;
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
  // Serves over `core`, a recovered core over a log this process may append to: Open's second
  // half, and how a replica that was elected leader starts serving over the core it kept
  // applying as a follower (replication/dispatcher_replica.h). Every worker the state knows is
  // given a full worker_timeout_ms from now before it may be declared lost, so a new leader
  // never moves healthy tasks. Errors as Open's, after the journal opened.
  static absl::StatusOr<std::unique_ptr<DispatcherImpl>> Serve(
      const DispatcherOptions& options, std::unique_ptr<DispatcherCore> core);
  // The core options `options` ask for.
  static DispatcherCoreOptions CoreOptions(const DispatcherOptions& options);
  ~DispatcherImpl();

  // `caller` must be granted Python functions if the pipeline runs any
  // (dispatcher/python_function_grant.h).
  absl::Status RegisterDataset(const RegisterDatasetRequest& request,
                               RegisterDatasetResponse* response, const Caller& caller = {});
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
  // One reader per consumer (reader_leases.h), after checking `caller` may access the job.
  absl::Status ClaimConsumer(const ClaimConsumerRequest& request, ClaimConsumerResponse* response,
                             const Caller& caller = {});
  absl::Status ReleaseConsumer(const ReleaseConsumerRequest& request, const Caller& caller = {});
  // FailedPrecondition, before any position moves, for a reader that does not hold a claimed
  // consumer (ReaderLeases::CheckHolder).
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
                                   RecomputeCacheChunkResponse* response) {
    return cache_->RecomputeChunk(request, response);
  }
  // A worker's profile of a cache_policy auto job (or why it could not take one): decides,
  // evicts what the decision needs room from, journals, and answers the job's decision — the
  // one already journaled, if another report came first. FailedPrecondition for a job without
  // cache_policy auto.
  absl::Status ReportCacheProfile(const ReportCacheProfileRequest& request,
                                  ReportCacheProfileResponse* response) {
    return cache_->ReportCacheProfile(request, response);
  }
  // Journals a compute decision for every cache_policy auto job that has waited for a profile
  // longer than cache_profile_timeout_ms. Also run by the background thread.
  absl::Status DecideOverdueCaches() { return cache_->DecideOverdue(); }
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
  absl::Status RunPolicies() { return policy_runner_.RunPolicies(); }

  // Gives the dispatcher a provisioner (provisioner.h) that keeps between `min_workers` and
  // `max_workers` remote workers, as many as the jobs' tasks want; placement policies then
  // count on max_workers remote workers (without a provisioner: on the live ones).
  void SetProvisioner(std::unique_ptr<Provisioner> provisioner, int32_t min_workers,
                      int32_t max_workers) {
    provisioning_.Set(std::move(provisioner), min_workers, max_workers);
  }
  // One pass of provisioning: asks the provisioner for the workers the jobs want, if that
  // changed. Also run by the background thread, which must be the only caller (the local
  // provisioner's workers belong to the thread that starts them).
  void Provision() { provisioning_.Provision(); }

  // One pass of the failure detector: journals WorkerLost for every live worker silent for
  // longer than the timeout. Also run every timeout/4 by a background thread started by Open.
  absl::Status CheckLiveness() { return liveness_.CheckLiveness(); }
  // Journals RetireJob for every job idle past job_retention_ms whose epochs are all finished.
  // Also run by the background thread.
  absl::Status RetireIdleJobs() { return retention_.RetireIdleJobs(); }

 private:
  DispatcherImpl(const DispatcherOptions& options, std::unique_ptr<DispatcherCore> core);
  // The cache coordinator's share of `options`.
  static CacheCoordinatorOptions CacheOptions(const DispatcherOptions& options);
  // Counts every known worker as freshly seen, every job as active and every finished task as
  // unread: no spurious loss or retirement right after a restart.
  void StartFromRecoveredState() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs fn(state) with fn under the core's lock and mu_ (in that order: the lock order).
  template <typename Fn>
  auto WithState(Fn&& fn) const ABSL_LOCKS_EXCLUDED(mu_) {
    return core_->Read([&](const DispatcherState& state) {
      absl::MutexLock lock(&mu_);
      return fn(state);
    });
  }
  // NotFound for no job `job_id`; CheckJobAccess's refusal when `caller` may not read it.
  absl::Status CheckCallerMayRead(int64_t job_id, const Caller& caller) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Journals a random cluster id if the recovered state has none (a new journal).
  absl::Status NameCluster();
  // Whether `job`'s work is over at `now`: every epoch it started is finished and read to its
  // end, and it started all its num_epochs or no client asked about it (JobRetention) for
  // JobActivityTracker::kWindowUs, over which its rates have decayed to 0. A trainer that comes
  // back to it makes it not over again.
  bool JobOver(const DispatcherState& state, const JobState& job, uint64_t now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // AlreadyExists (logged and counted) when `request`'s worker id is registered at another
  // address by a worker that is live at `now` (RegisterWorker); else OK.
  absl::Status RefuseDuplicateWorker(const DispatcherState& state,
                                     const RegisterWorkerRequest& request, uint64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job named `name` that `caller` means (names are per owner). With `owner` empty or the
  // caller's own: the caller's own job of that name, or nullptr when it has none (an
  // unauthenticated caller's own jobs are the unowned ones). With another owner: that owner's
  // job of that name — NotFound naming name and owner when it has none, PermissionDenied
  // (CheckJobAccess) unless its ACL names the caller. A name never resolves to another owner's
  // job unless the caller names that owner, so no ACL can put a job in another's namespace.
  // Elastic resume: the update that makes the job `request` names go on at
  // request.options().num_consumers from request.resume_positions (nullopt when it has that
  // many consumers already). InvalidArgument naming what does not fit: positions that are not
  // one per consumer of the job, of its job and resume_epoch, naming only their own tasks.
  absl::StatusOr<std::optional<Update>> ResumeUpdate(const DispatcherState& state,
                                                     const GetOrCreateJobRequest& request,
                                                     const Caller& caller)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static absl::StatusOr<const JobState*> FindNamedJob(const DispatcherState& state,
                                                      const std::string& name,
                                                      const std::string& owner,
                                                      const Caller& caller);
  // unread_finished_, for the subsystems' hooks.
  std::set<int64_t> UnreadFinishedTasks() const ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets what is kept beside the state about retired job `job` and its `tasks`.
  void ForgetJob(int64_t job, const std::vector<int64_t>& tasks) ABSL_LOCKS_EXCLUDED(mu_);
  // Lists or unlists the finished `task` in unread_finished_, by consumed_.
  void TrackUnread(const TaskState& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Raises at_least_[task_id] to `count`.
  void KnowAtLeast(int64_t task_id, int64_t count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What `consumer` of `epoch` (of `job`, SHARDING_EQUAL) learns of the other consumers'
  // element counts (dispatcher/consumer_shares.h).
  OtherShares OthersOf(const DispatcherState& state, const JobState& job, const EpochState& epoch,
                       int32_t consumer) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills `def` but for its pipeline, which it returns (def->pipeline_key names it).
  const PipelineDef& FillTaskDef(const DispatcherState& state, const TaskState& task,
                                 TaskDef* def) const;
  // OK unless creating a job with `options` would take `caller` beyond options_.limits
  // (ResourceExhausted naming the flag).
  absl::Status CheckClientLimits(const DispatcherState& state, const Caller& caller,
                                 const JobOptions& options) const;
  void LivenessLoop();
  // CollectMetrics from `state`.
  void CollectMetrics(const DispatcherState& state, MetricSamples& out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What StartEpoch looked up before it proposes the epoch.
  struct EpochToStart {
    PipelineDef def;
    uint64_t seed = 0;
    // How the epoch would use its cache in the state looked at. The proposal decides again
    // under the core's lock: the cache may have changed meanwhile (its mode, not its key).
    EpochCache foreseen;
  };
  using SplitPlan = google::protobuf::RepeatedPtrField<Split>;
  // StartEpoch's look at the state, with its waits outside the locks (for a cache_policy auto
  // job's decision, for the job's own earlier epoch to write the cache it would compute past):
  // nullopt once `response` is answered (the epoch started), or what to start. Errors: the
  // job's, or what the state would refuse of the epoch.
  absl::StatusOr<std::optional<EpochToStart>> AwaitEpochStartable(const StartEpochRequest& request,
                                                                  StartEpochResponse* response,
                                                                  const Caller& caller)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A StartEpochUpdate of `request`'s epoch with `cache`, and no plan.
  static Update StartEpochOf(const StartEpochRequest& request, const EpochCache& cache);
  // Lists the job's splits (outside the locks: it reads directories) and orders them for the
  // epoch to start.
  absl::StatusOr<SplitPlan> PlanEpochSplits(const StartEpochRequest& request,
                                            const EpochToStart& to_start) const;
  // Proposes the epoch, its cache decided under the core's lock: a GET epoch's plan is its
  // cache's chunks, any other's `plan` (moved from). Without a `plan` where one is needed it
  // sets `plan_missing` and refuses (Aborted). Answers `response` once applied.
  absl::Status ProposeEpochStart(const StartEpochRequest& request, const EpochToStart& to_start,
                                 std::optional<SplitPlan>& plan, bool& plan_missing,
                                 StartEpochResponse* response) ABSL_LOCKS_EXCLUDED(mu_);

  const DispatcherOptions options_;
  // The durable state: the journal, DispatcherState, snapshots and fail-stop.
  const std::unique_ptr<DispatcherCore> core_;
  // The caches' decisions, profiles, evictions and cache root.
  const std::unique_ptr<CacheCoordinator> cache_;
  // The failure detector: when each worker was last heard from.
  WorkerLiveness liveness_;
  ReaderLeases leases_;
  // When each job was last asked about; retires idle ones.
  JobRetention retention_;
  // The provisioner, if any, and what it was asked for.
  WorkerProvisioning provisioning_;
  // The heartbeats' counters per job and the resource policies.
  PolicyRunner policy_runner_;
  // The Env pipelines' sources are listed through: options_.env, confined to
  // options_.data_roots when it has a value.
  const std::unique_ptr<ConfinedEnv> confined_env_;
  Env* const source_env_;

  // Guards what the dispatcher keeps beside the durable state (rebuilt from heartbeats after a
  // restart). Lock order: the core's lock (WithState, DispatcherCore::Read), then mu_, then the
  // subsystems' (cache_, liveness_, retention_, policy_runner_ then provisioning_); never held
  // across a Propose.
  mutable absl::Mutex mu_;
  // Task id -> the next index its consumer needs, from its latest client heartbeat (lower than
  // before when the consumer resumed from an older saved position).
  std::map<int64_t, int64_t> consumed_ ABSL_GUARDED_BY(mu_);
  // Task id -> elements the task is known to have (the most any worker reported producing or
  // its consumer acknowledged): lower bounds that only grow, for equal shares.
  std::map<int64_t, int64_t> at_least_ ABSL_GUARDED_BY(mu_);
  // Tasks their reader read to their end (ClientHeartbeatRequest.ended; at_least_ holds their
  // exact count): final for equal shares even when no worker could report them finished.
  std::set<int64_t> read_to_end_ ABSL_GUARDED_BY(mu_);
  // The same heartbeats as the status page and /metrics show them.
  JobActivityTracker activity_ ABSL_GUARDED_BY(mu_);
  // Counted for /metrics since this process started (not journaled).
  struct Counters {
    // Epochs started, by EpochCache::Mode (COMPUTE, PUT, GET).
    int64_t epochs_started[3] = {0, 0, 0};
    // RegisterWorker calls refused: the id is live at another address (RegisterWorker).
    int64_t duplicate_workers_refused = 0;
    // DispatcherState::task_moves() once the journal was replayed.
    int64_t task_moves_at_open = 0;
  };
  Counters counters_ ABSL_GUARDED_BY(mu_);
  // The finished tasks whose consumer has not read to their end: their workers still serve
  // them (listed in worker heartbeats with the unfinished ones). A finished task whose consumer
  // has read to its end is no longer listed to its worker; listed again (its consumer resumed
  // from an older position), the worker recomputes it. Not journaled: after a restart every
  // finished task is listed until its consumer reports again or its job is retired.
  std::set<int64_t> unread_finished_ ABSL_GUARDED_BY(mu_);

  absl::Notification stopping_;
  std::thread liveness_thread_;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_DISPATCHER_IMPL_H_
