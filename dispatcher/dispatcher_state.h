// DispatcherState: the only holder of the cluster's durable state (DESIGN.md §3), a pure state
// machine. It changes only through Apply(seq, update), a deterministic function of the state
// and the update, so that a dispatcher restarted from a snapshot plus the journal records after
// it reaches exactly the state it had (compare ToProto() bytes).
//
// What it holds: datasets (pipelines by fingerprint), jobs, epochs with their split plans, lease
// cursors and cache mode, tasks with their worker, generation and every split leased to them in
// order, workers with their incarnations, and caches with their manifests (DESIGN.md §5) — until
// a job is retired (RetireJobUpdate), which removes it with its epochs and tasks. What it does
// not hold: liveness timestamps, client progress and metrics (DispatcherImpl keeps those,
// rebuilt from heartbeats).
//
// Thread-compatible: DispatcherImpl serializes access.
#ifndef GRANARY_DISPATCHER_DISPATCHER_STATE_H_
#define GRANARY_DISPATCHER_DISPATCHER_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/dispatcher_state.pb.h"
#include "proto/journal.pb.h"

namespace granary {

// Whether `epoch` still hands out splits (not finished, its plan not fully leased): while it
// does, a scaling step may add or shed its tasks; after, its task set is final.
inline bool HandsOutSplits(const EpochState& epoch) {
  return !epoch.finished() && epoch.next_split() < epoch.plan_size();
}

class DispatcherState {
 public:
  DispatcherState() = default;

  // The state a snapshot describes. InvalidArgument if the snapshot lists an id twice (see
  // state_invariants.h for the full check of a loaded state).
  static absl::StatusOr<DispatcherState> FromProto(const DispatcherStateProto& proto);
  // Sorted by id throughout: equal states give equal (deterministically serialized) bytes.
  DispatcherStateProto ToProto() const;

  // Whether `update` applies to this state: OK, or why Apply would refuse it (NotFound for an
  // unknown job, task, dataset or cache; AlreadyExists for what is done already — a started
  // epoch, a finished task, a lease from an older position; FailedPrecondition for a stale
  // generation or incarnation, an epoch that is not the job's next, an unfinished job to
  // retire; OutOfRange for an epoch past num_epochs; Aborted for a cache no longer in the
  // state its epoch's mode was decided on; InvalidArgument for a malformed update). The
  // dispatcher core (dispatcher_core.h) calls it before journaling, so that a record is
  // journaled only when it applies to the state it was proposed against.
  absl::Status Validate(const Update& update) const;
  // Applies journal record `seq`. REQUIRES: seq == applied_seq() + 1. An update Validate
  // refuses (a record proposed concurrently with one that changed the state first, or journaled
  // by an older version without the check) changes nothing but applied_seq(), and Validate's
  // status is returned; replay sees the same status, so it is informational, not an error of
  // the journal.
  absl::Status Apply(uint64_t seq, const Update& update);
  uint64_t applied_seq() const { return applied_seq_; }
  // Tasks given to another worker (or taken from a lost one) by the records this object
  // applied (not part of the state: a state loaded from a snapshot starts at 0).
  int64_t task_moves() const { return task_moves_; }

  // Lookups; nullptr when absent.
  const DatasetState* FindDataset(const std::string& dataset_id) const;
  const JobState* FindJob(int64_t job_id) const;
  // Job names are per owner (JobState.owner; "" for unowned jobs): two clients may each have a
  // job called "train". The job `owner` named `name`.
  const JobState* FindJobByName(const std::string& owner, const std::string& name) const;
  const EpochState* FindEpoch(int64_t job_id, int64_t epoch) const;
  const TaskState* FindTask(int64_t task_id) const;
  const WorkerState* FindWorker(const std::string& worker_id) const;
  const CacheState* FindCache(const std::string& cache_key) const;
  // The lease of `consumer` of `job` (JobState.leases); nullptr when it was never claimed.
  static const ConsumerLease* FindLease(const JobState& job, int32_t consumer);
  // Whether cache `cache_key` is being written (incomplete) or an unfinished epoch reads or
  // writes it: such a cache is never evicted.
  bool CacheInUse(const std::string& cache_key) const;

  // The unfinished tasks assigned to `worker_id`, by task id. Costs O(those tasks), however
  // many finished ones the state holds.
  std::vector<const TaskState*> UnfinishedTasksOfWorker(const std::string& worker_id) const;
  // The tasks of one consumer in one epoch, by slot.
  std::vector<const TaskState*> TasksOfConsumer(int64_t job_id, int64_t epoch,
                                                int32_t consumer) const;
  const std::map<std::string, DatasetState>& datasets() const { return datasets_; }
  const std::map<int64_t, JobState>& jobs() const { return jobs_; }
  const std::map<std::pair<int64_t, int64_t>, EpochState>& epochs() const { return epochs_; }
  const std::map<int64_t, TaskState>& tasks() const { return tasks_; }
  const std::map<std::string, WorkerState>& workers() const { return workers_; }
  const std::map<std::string, CacheState>& caches() const { return caches_; }
  int64_t next_job_id() const { return next_job_id_; }
  int64_t next_task_id() const { return next_task_id_; }
  const std::string& cluster_id() const { return cluster_id_; }

 private:
  // Validate, by kind of update.
  absl::Status ValidateRegisterDataset(const RegisterDatasetUpdate& u) const;
  absl::Status ValidateCreateJob(const CreateJobUpdate& u) const;
  absl::Status ValidateStartEpoch(const StartEpochUpdate& u) const;
  absl::Status ValidateRegisterWorker(const RegisterWorkerUpdate& u) const;
  absl::Status ValidateLeaseSplits(const LeaseSplitsUpdate& u) const;
  absl::Status ValidateTaskFinished(const TaskFinishedUpdate& u) const;
  absl::Status ValidateWorkerLost(const WorkerLostUpdate& u) const;
  absl::Status ValidateRetireJob(const RetireJobUpdate& u) const;
  absl::Status ValidateSetClusterId(const SetClusterIdUpdate& u) const;
  absl::Status ValidateInvalidateCache(const InvalidateCacheUpdate& u) const;
  absl::Status ValidateScaleJob(const ScaleJobUpdate& u) const;
  absl::Status ValidateDecideCache(const DecideCacheUpdate& u) const;
  absl::Status ValidateEvictCache(const EvictCacheUpdate& u) const;
  absl::Status ValidateResumeAtConsumers(const ResumeAtConsumersUpdate& u) const;
  absl::Status ValidateClaimConsumer(const ClaimConsumerUpdate& u) const;
  absl::Status ValidateReleaseConsumer(const ReleaseConsumerUpdate& u) const;
  // Apply, by kind of update, of an update Validate accepted.
  absl::Status ApplyRegisterDataset(const RegisterDatasetUpdate& u);
  absl::Status ApplyCreateJob(const CreateJobUpdate& u);
  absl::Status ApplyStartEpoch(const StartEpochUpdate& u, uint64_t seq);
  absl::Status ApplyRegisterWorker(const RegisterWorkerUpdate& u);
  absl::Status ApplyLeaseSplits(const LeaseSplitsUpdate& u);
  absl::Status ApplyTaskFinished(const TaskFinishedUpdate& u, uint64_t seq);
  absl::Status ApplyWorkerLost(const WorkerLostUpdate& u);
  absl::Status ApplyRetireJob(const RetireJobUpdate& u);
  absl::Status ApplySetClusterId(const SetClusterIdUpdate& u);
  absl::Status ApplyInvalidateCache(const InvalidateCacheUpdate& u);
  absl::Status ApplyScaleJob(const ScaleJobUpdate& u);
  absl::Status ApplyDecideCache(const DecideCacheUpdate& u);
  absl::Status ApplyEvictCache(const EvictCacheUpdate& u);
  absl::Status ApplyResumeAtConsumers(const ResumeAtConsumersUpdate& u);
  absl::Status ApplyClaimConsumer(const ClaimConsumerUpdate& u);
  absl::Status ApplyReleaseConsumer(const ReleaseConsumerUpdate& u);

  // The remote tasks per consumer an epoch of `job` starts with: as the job says, or (0, and no
  // local ones) one per live remote worker.
  int64_t RemoteSlots(const JobState& job) const;
  // The lease of `consumer` of `job`, added (without holder, generation 0) if it has none.
  static ConsumerLease* MutableLease(JobState& job, int32_t consumer);
  // Adds `task` to (removes it from) the indices by worker.
  void IndexTask(const TaskState& task);
  void UnindexTask(const TaskState& task);

  // The epoch `task` belongs to; DataLoss if it does not exist (an inconsistent state).
  absl::StatusOr<EpochState*> EpochOf(const TaskState& task);
  // Creates a task of `epoch` (the next task id) for `consumer`'s `slot` on `worker_id` — or,
  // without one, on the worker ChooseWorker picks ("" = unassigned, generation 0) — and adds it
  // to the epoch, the indices and `loads`; returns it.
  TaskState& AddTask(EpochState& epoch, int32_t consumer, int32_t slot, bool local,
                     const std::optional<std::string>& worker_id,
                     std::map<std::string, int64_t>& loads);
  // Elastic resume, after the `old` tasks of `epoch` were dealt to its consumers and its shares
  // redealt: when the consumers are `growing` in number (whole old tasks cannot be dealt to
  // them equally), or some consumer would have nothing to read (no old task with unread
  // elements, no split of its share left — the workers had leased the plan ahead), every
  // consumer reads a part of each old task with unread elements (TaskState.read_stride),
  // through the task or a copy of it on a new slot (`next_slot`, per consumer), counted in
  // `loads`.
  void ShareOldTasks(EpochState& epoch, const std::vector<TaskState*>& old, bool growing,
                     std::vector<int32_t>& next_slot, std::map<std::string, int64_t>& loads);
  // Gives `task` to the worker ChooseWorker picks among `loads` as a new generation, and counts
  // it there; a task without a worker that finds none stays as it is.
  void MoveTask(TaskState& task, std::map<std::string, int64_t>& loads);
  // Gives `task` to `worker_id` ("" = unassigned) as a new generation.
  void Reassign(TaskState& task, const std::string& worker_id);
  // RegisterWorkerUpdate.take_over_load: moves one task to the idle `worker_id`.
  void TakeOverLoad(const std::string& worker_id, const std::map<std::string, int64_t>& loads);
  // Number of unfinished tasks per live worker (every live worker present, possibly with 0).
  std::map<std::string, int64_t> LiveWorkerLoads() const;

  uint64_t applied_seq_ = 0;
  int64_t task_moves_ = 0;
  std::string cluster_id_;
  int64_t next_job_id_ = 1;
  int64_t next_task_id_ = 1;
  std::map<std::string, DatasetState> datasets_;
  std::map<int64_t, JobState> jobs_;
  std::map<std::pair<int64_t, int64_t>, EpochState> epochs_;
  std::map<int64_t, TaskState> tasks_;
  std::map<std::string, WorkerState> workers_;
  std::map<std::string, CacheState> caches_;

  // Indices derived from the maps above (not serialized; FromProto rebuilds them), so that no
  // RPC's cost grows with the number of finished jobs the state holds.
  // Job ids by (name, owner) of named jobs.
  std::map<std::pair<std::string, std::string>, int64_t> job_ids_by_name_;
  // Task ids by worker id ("" = unassigned): every task, and the unfinished ones.
  std::map<std::string, std::set<int64_t>> tasks_by_worker_;
  std::map<std::string, std::set<int64_t>> unfinished_tasks_by_worker_;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_DISPATCHER_STATE_H_
