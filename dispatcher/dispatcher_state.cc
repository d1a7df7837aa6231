#include "dispatcher/dispatcher_state.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "cache/cache_policy.h"
#include "common/deterministic_serialization.h"
#include "common/history_log.h"
#include "common/read_stride.h"
#include "common/status_macros.h"
#include "dispatcher/assignment_policy.h"
#include "dispatcher/consumer_shares.h"
#include "dispatcher/request_limits.h"

namespace granary {

namespace {

// The history's fields of a task (common/FORMAT.md): "job=… epoch=… consumer=… task=… gen=…
// worker=…".
std::string TaskFields(const TaskState& task) {
  return absl::StrCat("job=", task.job_id(), " epoch=", task.epoch(), " consumer=", task.consumer(),
                      " task=", task.task_id(), " gen=", task.generation(),
                      " worker=", task.worker_id());
}

// The ids of the last `n` splits leased to `task`, comma-separated.
std::string LastLeased(const TaskState& task, int64_t n) {
  std::string ids;
  for (int64_t i = task.leased_size() - n; i < task.leased_size(); ++i) {
    absl::StrAppend(&ids, ids.empty() ? "" : ",", task.leased(i).id());
  }
  return ids;
}

}  // namespace

absl::StatusOr<DispatcherState> DispatcherState::FromProto(const DispatcherStateProto& proto) {
  DispatcherState s;
  s.applied_seq_ = proto.applied_seq();
  s.next_job_id_ = proto.next_job_id();
  s.next_task_id_ = proto.next_task_id();
  s.cluster_id_ = proto.cluster_id();
  const auto duplicate = [](absl::string_view what, const auto& id) {
    return absl::InvalidArgumentError(absl::StrCat("snapshot lists ", what, " ", id, " twice"));
  };
  for (const DatasetState& d : proto.datasets()) {
    if (!s.datasets_.emplace(d.dataset_id(), d).second) return duplicate("dataset", d.dataset_id());
  }
  for (const JobState& j : proto.jobs()) {
    if (!s.jobs_.emplace(j.job_id(), j).second) return duplicate("job", j.job_id());
  }
  for (const EpochState& e : proto.epochs()) {
    if (!s.epochs_.emplace(std::make_pair(e.job_id(), e.epoch()), e).second) {
      return duplicate("epoch", absl::StrCat(e.job_id(), "/", e.epoch()));
    }
  }
  for (const TaskState& t : proto.tasks()) {
    if (!s.tasks_.emplace(t.task_id(), t).second) return duplicate("task", t.task_id());
  }
  for (const WorkerState& w : proto.workers()) {
    if (!s.workers_.emplace(w.worker_id(), w).second) return duplicate("worker", w.worker_id());
  }
  for (const CacheState& c : proto.caches()) {
    if (!s.caches_.emplace(c.cache_key(), c).second) return duplicate("cache", c.cache_key());
  }
  for (const auto& [id, job] : s.jobs_) {
    if (!job.name().empty() &&
        !s.job_ids_by_name_.emplace(std::pair(job.name(), job.owner()), id).second) {
      return duplicate("job name", absl::StrCat(job.name(), " of owner '", job.owner(), "'"));
    }
  }
  for (const auto& [id, task] : s.tasks_) s.IndexTask(task);
  return s;
}

DispatcherStateProto DispatcherState::ToProto() const {
  DispatcherStateProto proto;
  proto.set_applied_seq(applied_seq_);
  proto.set_next_job_id(next_job_id_);
  proto.set_next_task_id(next_task_id_);
  proto.set_cluster_id(cluster_id_);
  for (const auto& [id, d] : datasets_) *proto.add_datasets() = d;
  for (const auto& [id, j] : jobs_) *proto.add_jobs() = j;
  for (const auto& [id, e] : epochs_) *proto.add_epochs() = e;
  for (const auto& [id, t] : tasks_) *proto.add_tasks() = t;
  for (const auto& [id, w] : workers_) *proto.add_workers() = w;
  for (const auto& [key, c] : caches_) *proto.add_caches() = c;
  return proto;
}

absl::Status DispatcherState::Apply(uint64_t seq, const Update& update) {
  if (seq != applied_seq_ + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal record ", seq, " applied after record ", applied_seq_));
  }
  applied_seq_ = seq;
  RETURN_IF_ERROR(Validate(update));
  switch (update.kind_case()) {
    case Update::kRegisterDataset:
      return ApplyRegisterDataset(update.register_dataset());
    case Update::kCreateJob:
      return ApplyCreateJob(update.create_job());
    case Update::kStartEpoch:
      return ApplyStartEpoch(update.start_epoch(), seq);
    case Update::kRegisterWorker:
      return ApplyRegisterWorker(update.register_worker());
    case Update::kLeaseSplits:
      return ApplyLeaseSplits(update.lease_splits());
    case Update::kTaskFinished:
      return ApplyTaskFinished(update.task_finished(), seq);
    case Update::kWorkerLost:
      return ApplyWorkerLost(update.worker_lost());
    case Update::kRetireJob:
      return ApplyRetireJob(update.retire_job());
    case Update::kSetClusterId:
      return ApplySetClusterId(update.set_cluster_id());
    case Update::kInvalidateCache:
      return ApplyInvalidateCache(update.invalidate_cache());
    case Update::kScaleJob:
      return ApplyScaleJob(update.scale_job());
    case Update::kDecideCache:
      return ApplyDecideCache(update.decide_cache());
    case Update::kEvictCache:
      return ApplyEvictCache(update.evict_cache());
    case Update::kResumeAtConsumers:
      return ApplyResumeAtConsumers(update.resume_at_consumers());
    case Update::kClaimConsumer:
      return ApplyClaimConsumer(update.claim_consumer());
    case Update::kReleaseConsumer:
      return ApplyReleaseConsumer(update.release_consumer());
    case Update::KIND_NOT_SET:
      break;
  }
  return absl::OkStatus();  // Unreachable: Validate refuses an update without a kind.
}

absl::Status DispatcherState::Validate(const Update& update) const {
  switch (update.kind_case()) {
    case Update::kRegisterDataset:
      return ValidateRegisterDataset(update.register_dataset());
    case Update::kCreateJob:
      return ValidateCreateJob(update.create_job());
    case Update::kStartEpoch:
      return ValidateStartEpoch(update.start_epoch());
    case Update::kRegisterWorker:
      return ValidateRegisterWorker(update.register_worker());
    case Update::kLeaseSplits:
      return ValidateLeaseSplits(update.lease_splits());
    case Update::kTaskFinished:
      return ValidateTaskFinished(update.task_finished());
    case Update::kWorkerLost:
      return ValidateWorkerLost(update.worker_lost());
    case Update::kRetireJob:
      return ValidateRetireJob(update.retire_job());
    case Update::kSetClusterId:
      return ValidateSetClusterId(update.set_cluster_id());
    case Update::kInvalidateCache:
      return ValidateInvalidateCache(update.invalidate_cache());
    case Update::kScaleJob:
      return ValidateScaleJob(update.scale_job());
    case Update::kDecideCache:
      return ValidateDecideCache(update.decide_cache());
    case Update::kEvictCache:
      return ValidateEvictCache(update.evict_cache());
    case Update::kResumeAtConsumers:
      return ValidateResumeAtConsumers(update.resume_at_consumers());
    case Update::kClaimConsumer:
      return ValidateClaimConsumer(update.claim_consumer());
    case Update::kReleaseConsumer:
      return ValidateReleaseConsumer(update.release_consumer());
    case Update::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("the update has no kind (an empty journal record)");
}

absl::Status DispatcherState::ValidateRegisterDataset(const RegisterDatasetUpdate& u) const {
  if (FindDataset(u.dataset_id()) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("dataset ", u.dataset_id(), " exists"));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyRegisterDataset(const RegisterDatasetUpdate& u) {
  DatasetState d;
  d.set_dataset_id(u.dataset_id());
  *d.mutable_pipeline() = u.pipeline();
  datasets_.emplace(u.dataset_id(), std::move(d));
  return absl::OkStatus();
}

absl::Status DispatcherState::ValidateCreateJob(const CreateJobUpdate& u) const {
  // DispatcherImpl refuses these before journaling; a record journaled without the checks (by
  // an older version) must still apply — as a no-op.
  RETURN_IF_ERROR(ValidateJobOptions(u.options()));
  RETURN_IF_ERROR(ValidateName("job name", u.name()));
  // Names were global before they were per owner: a journal of then replays the same.
  if (!u.name().empty() && FindJobByName(u.owner(), u.name()) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("job '", u.name(), "' of owner '", u.owner(), "' exists"));
  }
  if (FindDataset(u.dataset_id()) == nullptr) {
    return absl::NotFoundError(absl::StrCat("no dataset ", u.dataset_id()));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyCreateJob(const CreateJobUpdate& u) {
  JobState job;
  job.set_job_id(next_job_id_++);
  job.set_owner(u.owner());
  job.set_name(u.name());
  job.set_dataset_id(u.dataset_id());
  *job.mutable_options() = u.options();
  if (job.options().num_consumers() < 1) job.mutable_options()->set_num_consumers(1);
  job.set_created_num_worker_slots(u.options().num_worker_slots());
  job.set_created_num_local_slots(u.options().num_local_slots());
  if (!job.name().empty()) job_ids_by_name_[{job.name(), job.owner()}] = job.job_id();
  jobs_.emplace(job.job_id(), std::move(job));
  return absl::OkStatus();
}

absl::Status DispatcherState::ValidateStartEpoch(const StartEpochUpdate& u) const {
  const JobState* job_found = FindJob(u.job_id());
  if (job_found == nullptr) return absl::NotFoundError(absl::StrCat("no job ", u.job_id()));
  const JobState& job = *job_found;
  if (u.epoch() < job.epochs_started()) {
    return absl::AlreadyExistsError(
        absl::StrCat("job ", u.job_id(), " epoch ", u.epoch(), " already started"));
  }
  if (u.epoch() != job.epochs_started()) {
    return absl::FailedPreconditionError(absl::StrCat("job ", u.job_id(), " next epoch is ",
                                                      job.epochs_started(), ", not ", u.epoch()));
  }
  if (job.options().num_epochs() > 0 && u.epoch() >= job.options().num_epochs()) {
    return absl::OutOfRangeError(
        absl::StrCat("job ", u.job_id(), " has only ", job.options().num_epochs(), " epochs"));
  }
  // The cache must still be in the state the epoch's mode was decided on.
  const CacheState* cache = FindCache(u.cache().cache_key());
  if (u.cache().mode() == EpochCache::PUT && cache != nullptr) {
    return absl::AbortedError(
        absl::StrCat("cache ", u.cache().cache_key(), " is already being written"));
  }
  if (u.cache().mode() == EpochCache::GET && (cache == nullptr || !cache->complete())) {
    return absl::AbortedError(absl::StrCat("cache ", u.cache().cache_key(), " is not complete"));
  }
  const int32_t consumers = std::max(job.options().num_consumers(), 1);
  if (EffectiveSharding(job.options()) == SHARDING_EQUAL &&
      job.options().remainder() != REMAINDER_UNEVEN && u.plan_size() > 0 &&
      u.plan_size() < consumers) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", u.job_id(), " epoch ", u.epoch(), " has ", u.plan_size(), " splits for ", consumers,
        " consumers: equal shares need at least one split per consumer (split the "
        "files finer, e.g. tfrecord records_per_split, or use remainder uneven)"));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyStartEpoch(const StartEpochUpdate& u, uint64_t seq) {
  JobState& job = jobs_.find(u.job_id())->second;
  if (u.cache().mode() == EpochCache::PUT) {
    CacheState& put = caches_[u.cache().cache_key()];
    put.set_cache_key(u.cache().cache_key());
    put.set_put_job_id(u.job_id());
    put.set_put_epoch(u.epoch());
  }
  if (u.cache().mode() != EpochCache::COMPUTE)
    caches_[u.cache().cache_key()].set_last_used_seq(seq);
  job.set_epochs_started(u.epoch() + 1);
  EpochState epoch;
  epoch.set_job_id(u.job_id());
  epoch.set_epoch(u.epoch());
  *epoch.mutable_plan() = u.plan();
  *epoch.mutable_cache() = u.cache();
  const int32_t consumers = std::max(job.options().num_consumers(), 1);
  if (EffectiveSharding(job.options()) == SHARDING_EQUAL) {
    for (ConsumerShare& share : DealShares(u.plan(), consumers)) {
      *epoch.add_shares() = std::move(share);
    }
  }

  // Remote tasks per consumer, then its local ones.
  int64_t remote = RemoteSlots(job);
  int64_t local = std::max(job.options().num_local_slots(), 0);
  const int64_t max_slots = kMaxTasksPerEpoch / consumers;
  remote = std::clamp<int64_t>(remote, local > 0 ? 0 : 1, max_slots);
  local = std::min(local, max_slots - remote);
  const std::vector<std::string> assignment = AssignNewTasks(workers_, consumers * remote);
  std::map<std::string, int64_t> loads = LiveWorkerLoads();
  for (int32_t c = 0; c < consumers; ++c) {
    for (int32_t s = 0; s < remote + local; ++s) {
      const bool local_slot = s >= remote;
      AddTask(epoch, c, s, local_slot,
              local_slot ? std::nullopt : std::optional<std::string>(assignment[c * remote + s]),
              loads);
    }
  }
  epochs_.emplace(std::make_pair(u.job_id(), u.epoch()), std::move(epoch));
  return absl::OkStatus();
}

absl::Status DispatcherState::ValidateRegisterWorker(const RegisterWorkerUpdate& u) const {
  RETURN_IF_ERROR(ValidateName("worker id", u.worker_id()));
  RETURN_IF_ERROR(ValidateName("worker address", u.address()));
  RETURN_IF_ERROR(ValidateShmNonce(u.shm_nonce()));
  if (u.local_job_id() < 0 || u.local_consumer() < 0 || u.local_consumer() >= kMaxConsumers) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", u.worker_id(), " is local to job ",
                                                   u.local_job_id(), " consumer ",
                                                   u.local_consumer(), ", which cannot exist"));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyRegisterWorker(const RegisterWorkerUpdate& u) {
  WorkerState& w = workers_[u.worker_id()];
  w.set_worker_id(u.worker_id());
  w.set_address(u.address());
  w.set_shm_nonce(u.shm_nonce());
  w.set_incarnation(w.incarnation() + 1);
  w.set_standby(u.standby());
  w.set_lost(false);
  w.set_local_job_id(u.local_job_id());
  w.set_local_consumer(u.local_job_id() == 0 ? 0 : u.local_consumer());
  // A worker id registering as another kind than before keeps only the tasks it may run.
  std::map<std::string, int64_t> loads = LiveWorkerLoads();
  const std::set<int64_t> held = tasks_by_worker_[u.worker_id()];
  for (int64_t id : held) {
    TaskState& task = tasks_.find(id)->second;
    if (!IsLocalWorker(w) || (task.local() && IsLocalTo(w, task))) continue;
    // ChooseWorker never picks w for a task w may not run.
    if (!task.finished()) --loads[u.worker_id()];
    MoveTask(task, loads);
  }
  // Tasks left without a worker (none was alive) go to the live workers now — finished ones
  // too, as WorkerLost moves them: their consumers may not have read all of them yet (found by
  // `granary chaos --soak`: every worker lost at once after a dispatcher restart left a
  // finished, half-read task with no worker, and its reader stalled).
  const std::set<int64_t> unassigned = tasks_by_worker_[""];
  for (int64_t id : unassigned) MoveTask(tasks_.find(id)->second, loads);
  if (u.take_over_load() && !u.standby() && u.local_job_id() == 0 && loads[u.worker_id()] == 0) {
    TakeOverLoad(u.worker_id(), loads);
  }
  return absl::OkStatus();
}

void DispatcherState::TakeOverLoad(const std::string& worker_id,
                                   const std::map<std::string, int64_t>& loads) {
  // The most loaded remote worker holding two tasks or more (ties: lowest id).
  std::string busiest;
  int64_t busiest_load = 1;
  for (const auto& [id, load] : loads) {
    if (load > busiest_load && !IsLocalWorker(workers_.at(id))) {
      busiest = id;
      busiest_load = load;
    }
  }
  if (busiest.empty()) return;
  // Its remote task, of an epoch still handing out splits, with the fewest splits leased
  // (ties: the newest): the least to recompute.
  TaskState* moved = nullptr;
  for (int64_t id : unfinished_tasks_by_worker_[busiest]) {
    TaskState& task = tasks_.find(id)->second;
    const EpochState* epoch = FindEpoch(task.job_id(), task.epoch());
    if (task.local() || task.draining() || epoch == nullptr ||
        !HandsOutSplitsTo(*epoch, task.consumer())) {
      continue;
    }
    if (moved == nullptr || task.leased_size() <= moved->leased_size()) moved = &task;
  }
  if (moved != nullptr) Reassign(*moved, worker_id);
}

absl::Status DispatcherState::ValidateLeaseSplits(const LeaseSplitsUpdate& u) const {
  const TaskState* task = FindTask(u.task_id());
  if (task == nullptr) return absl::NotFoundError(absl::StrCat("no task ", u.task_id()));
  if (task->leased_size() != u.from_seq()) {
    return absl::AlreadyExistsError(absl::StrCat("task ", u.task_id(), " has ", task->leased_size(),
                                                 " splits leased, not ", u.from_seq()));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyLeaseSplits(const LeaseSplitsUpdate& u) {
  TaskState& task = tasks_.find(u.task_id())->second;
  ASSIGN_OR_RETURN(EpochState * epoch, EpochOf(task));
  // A shed task leases nothing more (a lease journaled before the shed was applied first).
  const std::vector<int64_t> next =
      task.draining() ? std::vector<int64_t>()
                      : NextPlanIndices(*epoch, task.consumer(), std::max<int64_t>(u.max(), 0));
  const int64_t n = static_cast<int64_t>(next.size());
  for (int64_t i : next) *task.add_leased() = epoch->plan(i);
  if (n > 0) {
    GRANARY_HISTORY_RECORD("lease", "ok", TaskFields(task), " splits=", LastLeased(task, n));
  }
  MarkLeased(*epoch, task.consumer(), n);
  return absl::OkStatus();
}

absl::Status DispatcherState::ValidateTaskFinished(const TaskFinishedUpdate& u) const {
  const TaskState* task = FindTask(u.task_id());
  if (task == nullptr) return absl::NotFoundError(absl::StrCat("no task ", u.task_id()));
  if (task->finished()) {
    return absl::AlreadyExistsError(absl::StrCat("task ", u.task_id(), " already finished"));
  }
  if (u.generation() != task->generation()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", u.task_id(), " is at generation ", task->generation(), ", not ", u.generation()));
  }
  if (u.num_elements() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", u.task_id(), " finished with ", u.num_elements(), " elements"));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyTaskFinished(const TaskFinishedUpdate& u, uint64_t seq) {
  TaskState& task = tasks_.find(u.task_id())->second;
  ASSIGN_OR_RETURN(EpochState * epoch, EpochOf(task));
  const bool put = epoch->cache().mode() == EpochCache::PUT;
  auto cache_it = caches_.find(epoch->cache().cache_key());
  if (put && cache_it == caches_.end()) {
    return absl::DataLossError(absl::StrCat("task ", u.task_id(), ": its epoch writes cache ",
                                            epoch->cache().cache_key(), ", which is unknown"));
  }
  UnindexTask(task);
  task.set_finished(true);
  task.set_num_elements(u.num_elements());
  IndexTask(task);
  if (put) *task.mutable_cache_chunks() = u.cache_chunks();
  epoch->set_finished(
      std::all_of(epoch->task_ids().begin(), epoch->task_ids().end(), [this](int64_t id) {
        const TaskState* t = FindTask(id);
        return t != nullptr && t->finished();
      }));
  if (epoch->finished() && put) {
    // Every task has sealed its chunks: the manifest is their chunks, by task.
    CacheState& cache = cache_it->second;
    cache.set_complete(true);
    cache.set_last_used_seq(seq);  // Completing is a use: not the first thing evicted after.
    for (int64_t id : epoch->task_ids()) {
      const TaskState* finished = FindTask(id);
      for (const CacheChunk& chunk : finished->cache_chunks()) {
        *cache.add_chunks() = chunk;
        cache.set_num_elements(cache.num_elements() + chunk.num_elements());
        cache.set_bytes(cache.bytes() + chunk.bytes());
      }
      CacheTaskPlan* plan = cache.add_task_plans();
      plan->set_task_id(id);
      *plan->mutable_leased() = finished->leased();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<EpochState*> DispatcherState::EpochOf(const TaskState& task) {
  auto it = epochs_.find({task.job_id(), task.epoch()});
  if (it == epochs_.end()) {
    return absl::DataLossError(absl::StrCat("task ", task.task_id(), " belongs to job ",
                                            task.job_id(), " epoch ", task.epoch(),
                                            ", which does not exist"));
  }
  return &it->second;
}

absl::Status DispatcherState::ValidateWorkerLost(const WorkerLostUpdate& u) const {
  const WorkerState* worker = FindWorker(u.worker_id());
  if (worker == nullptr || worker->incarnation() != u.incarnation() || worker->lost()) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", u.worker_id(), " incarnation ",
                                                      u.incarnation(), " is not a live worker"));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyWorkerLost(const WorkerLostUpdate& u) {
  workers_.find(u.worker_id())->second.set_lost(true);
  // Finished tasks move too: their consumers may not have read all of them yet.
  std::map<std::string, int64_t> loads = LiveWorkerLoads();
  const std::set<int64_t> held = tasks_by_worker_[u.worker_id()];
  for (int64_t id : held) MoveTask(tasks_.find(id)->second, loads);
  return absl::OkStatus();
}

absl::Status DispatcherState::ValidateSetClusterId(const SetClusterIdUpdate& u) const {
  if (!cluster_id_.empty()) {
    return absl::AlreadyExistsError(absl::StrCat("the cluster is ", cluster_id_, " already"));
  }
  return ValidateName("cluster id", u.cluster_id());
}

absl::Status DispatcherState::ApplySetClusterId(const SetClusterIdUpdate& u) {
  cluster_id_ = u.cluster_id();
  return absl::OkStatus();
}

absl::Status DispatcherState::ValidateInvalidateCache(const InvalidateCacheUpdate& u) const {
  const CacheState* cache = FindCache(u.cache_key());
  if (cache == nullptr) return absl::NotFoundError(absl::StrCat("no cache ", u.cache_key()));
  if (!cache->complete()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cache ", u.cache_key(), " is not complete: nothing to invalidate"));
  }
  if (cache->invalid()) {
    return absl::AlreadyExistsError(absl::StrCat("cache ", u.cache_key(), " is invalid already"));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyInvalidateCache(const InvalidateCacheUpdate& u) {
  auto it = caches_.find(u.cache_key());
  it->second.set_invalid(true);
  it->second.set_invalid_reason(u.reason());
  return absl::OkStatus();
}

absl::Status DispatcherState::ValidateDecideCache(const DecideCacheUpdate& u) const {
  const JobState* job_found = FindJob(u.job_id());
  if (job_found == nullptr) return absl::NotFoundError(absl::StrCat("no job ", u.job_id()));
  const JobState& job = *job_found;
  if (job.options().cache_policy() != CACHE_AUTO) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", u.job_id(), " does not have cache_policy auto"));
  }
  if (job.has_cache_decision()) {
    return absl::AlreadyExistsError(
        absl::StrCat("job ", u.job_id(), " has its cache decision already"));
  }
  const std::vector<int> marks = MarkPoints(FindDataset(job.dataset_id())->pipeline());
  if (u.decision().cache_point() != 0 &&
      std::find(marks.begin(), marks.end(), u.decision().cache_point()) == marks.end()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", u.job_id(), ": cache point ",
                                                   u.decision().cache_point(),
                                                   " is not one of its marks"));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyDecideCache(const DecideCacheUpdate& u) {
  *jobs_.find(u.job_id())->second.mutable_cache_decision() = u.decision();
  return absl::OkStatus();
}

absl::Status DispatcherState::ValidateEvictCache(const EvictCacheUpdate& u) const {
  if (FindCache(u.cache_key()) == nullptr) {
    return absl::NotFoundError(absl::StrCat("no cache ", u.cache_key()));
  }
  if (CacheInUse(u.cache_key())) {
    return absl::FailedPreconditionError(
        absl::StrCat("cache ", u.cache_key(), " is being written or read: not evicted"));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyEvictCache(const EvictCacheUpdate& u) {
  caches_.erase(u.cache_key());
  return absl::OkStatus();
}

bool DispatcherState::CacheInUse(const std::string& cache_key) const {
  const CacheState* cache = FindCache(cache_key);
  if (cache != nullptr && !cache->complete()) return true;
  for (const auto& [id, epoch] : epochs_) {
    if (!epoch.finished() && epoch.cache().mode() != EpochCache::COMPUTE &&
        epoch.cache().cache_key() == cache_key) {
      return true;
    }
  }
  return false;
}

absl::Status DispatcherState::ValidateScaleJob(const ScaleJobUpdate& u) const {
  const JobState* job = FindJob(u.job_id());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", u.job_id()));
  return ValidateScaling(u.job_id(), u.num_worker_slots(), u.num_local_slots(),
                         std::max(job->options().num_consumers(), 1));
}

absl::Status DispatcherState::ApplyScaleJob(const ScaleJobUpdate& u) {
  JobState& job = jobs_.find(u.job_id())->second;
  const int32_t consumers = std::max(job.options().num_consumers(), 1);
  job.mutable_options()->set_num_worker_slots(u.num_worker_slots());
  job.mutable_options()->set_num_local_slots(u.num_local_slots());
  job.set_scaling_steps(job.scaling_steps() + 1);
  job.set_last_scaling(u.reason().substr(0, kMaxScalingReasonBytes));
  std::map<std::string, int64_t> loads = LiveWorkerLoads();
  for (int64_t e = 0; e < job.epochs_started(); ++e) {
    auto epoch_it = epochs_.find({job.job_id(), e});
    if (epoch_it == epochs_.end()) continue;
    EpochState& epoch = epoch_it->second;
    if (!HandsOutSplits(epoch)) continue;
    for (int32_t c = 0; c < consumers; ++c) {
      // Tasks join only consumers that still have splits to lease.
      if (!HandsOutSplitsTo(epoch, c)) continue;
      // The consumer's tasks still leasing splits, remote and local, by slot.
      std::vector<TaskState*> leasing[2];
      int32_t next_slot = 0;
      for (int64_t id : epoch.task_ids()) {
        TaskState& task = tasks_.find(id)->second;
        if (task.consumer() != c) continue;
        next_slot = std::max(next_slot, task.slot() + 1);
        if (!task.finished() && !task.draining()) leasing[task.local()].push_back(&task);
      }
      for (const bool local : {false, true}) {
        std::vector<TaskState*>& tasks = leasing[local];
        const int64_t target = local ? u.num_local_slots() : u.num_worker_slots();
        std::sort(tasks.begin(), tasks.end(),
                  [](const TaskState* a, const TaskState* b) { return a->slot() < b->slot(); });
        for (size_t i = target; i < tasks.size(); ++i) tasks[i]->set_draining(true);
        for (int64_t n = static_cast<int64_t>(tasks.size());
             n < target && epoch.task_ids_size() < kMaxTasksPerEpoch; ++n) {
          AddTask(epoch, c, next_slot++, local, std::nullopt, loads);
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ValidateRetireJob(const RetireJobUpdate& u) const {
  const JobState* job = FindJob(u.job_id());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", u.job_id()));
  for (int64_t e = 0; e < job->epochs_started(); ++e) {
    const EpochState* epoch = FindEpoch(job->job_id(), e);
    if (epoch != nullptr && !epoch->finished()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", u.job_id(), " epoch ", e, " is not finished: not retired"));
    }
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyRetireJob(const RetireJobUpdate& u) {
  auto job_it = jobs_.find(u.job_id());
  const JobState& job = job_it->second;
  for (int64_t e = 0; e < job.epochs_started(); ++e) {
    auto epoch_it = epochs_.find({job.job_id(), e});
    if (epoch_it == epochs_.end()) continue;
    for (int64_t id : epoch_it->second.task_ids()) {
      auto task_it = tasks_.find(id);
      if (task_it == tasks_.end()) continue;
      UnindexTask(task_it->second);
      tasks_.erase(task_it);
    }
    epochs_.erase(epoch_it);
  }
  if (!job.name().empty()) job_ids_by_name_.erase(std::pair(job.name(), job.owner()));
  jobs_.erase(job_it);
  return absl::OkStatus();
}

int64_t DispatcherState::RemoteSlots(const JobState& job) const {
  const int64_t remote = job.options().num_worker_slots();
  if (remote > 0 || job.options().num_local_slots() > 0) return remote;
  return std::count_if(workers_.begin(), workers_.end(), [](const auto& w) {
    return !w.second.lost() && !w.second.standby() && !IsLocalWorker(w.second);
  });
}

absl::Status DispatcherState::ValidateResumeAtConsumers(const ResumeAtConsumersUpdate& u) const {
  const JobState* job = FindJob(u.job_id());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", u.job_id()));
  const std::string name = absl::StrCat("job ", u.job_id());
  if (job->options().num_consumers() == u.num_consumers()) {
    return absl::AlreadyExistsError(
        absl::StrCat(name, " already has ", u.num_consumers(), " consumers"));
  }
  if (job->options().num_consumers() != u.from_consumers()) {
    return absl::FailedPreconditionError(absl::StrCat(name, " has ", job->options().num_consumers(),
                                                      " consumers, not ", u.from_consumers(),
                                                      ": the positions are not of its consumers"));
  }
  JobOptions resumed = job->options();
  resumed.set_num_consumers(u.num_consumers());
  if (u.num_consumers() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": cannot resume at ", u.num_consumers(), " consumers"));
  }
  RETURN_IF_ERROR(ValidateJobOptions(resumed));
  if (job->options().num_local_slots() > 0 || job->options().placement() != PLACEMENT_STATIC) {
    return absl::FailedPreconditionError(absl::StrCat(
        name,
        " has local workers, which serve one consumer each: it cannot resume at another "
        "number of consumers"));
  }
  if (u.epoch() < 0 || u.epoch() + 1 < job->epochs_started()) {
    return absl::FailedPreconditionError(absl::StrCat(name, " has started ", job->epochs_started(),
                                                      " epochs: the positions of epoch ", u.epoch(),
                                                      " are not of its last"));
  }
  const EpochState* epoch = FindEpoch(u.job_id(), u.epoch());
  for (const auto& [task_id, next] : u.next_index()) {
    const TaskState* task = FindTask(task_id);
    if (epoch == nullptr || task == nullptr || task->job_id() != u.job_id() ||
        task->epoch() != u.epoch()) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": the positions name task ", task_id,
                                                     ", not one of epoch ", u.epoch(), "'s"));
    }
    if (next < task->start_index() || (task->finished() && next > task->num_elements())) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": the positions resume task ", task_id, " at index ", next, ", outside [",
          task->start_index(), ", ", task->finished() ? task->num_elements() : next, "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyResumeAtConsumers(const ResumeAtConsumersUpdate& u) {
  JobState& job = jobs_.find(u.job_id())->second;
  job.mutable_options()->set_num_consumers(u.num_consumers());
  auto* leases = job.mutable_leases();
  leases->erase(std::remove_if(leases->begin(), leases->end(),
                               [&](const ConsumerLease& lease) {
                                 return lease.consumer() >= u.num_consumers();
                               }),
                leases->end());
  auto epoch_it = epochs_.find({u.job_id(), u.epoch()});
  // An epoch whose tasks have all finished producing is dealt too: its consumers may not have
  // read it all yet.
  if (epoch_it == epochs_.end()) return absl::OkStatus();
  EpochState& epoch = epoch_it->second;
  const int32_t consumers = u.num_consumers();
  // The epoch's tasks, by old consumer and slot, dealt round robin to the new consumers.
  std::vector<TaskState*> old;
  for (int64_t id : epoch.task_ids()) old.push_back(&tasks_.find(id)->second);
  std::sort(old.begin(), old.end(), [](const TaskState* a, const TaskState* b) {
    return std::make_pair(a->consumer(), a->slot()) < std::make_pair(b->consumer(), b->slot());
  });
  std::map<std::string, int64_t> plan_index;
  for (int i = 0; i < epoch.plan_size(); ++i) {
    plan_index[SerializeDeterministically(epoch.plan(i))] = i;
  }
  std::vector<std::vector<int64_t>> leased(consumers);
  std::vector<int32_t> next_slot(consumers, 0);
  std::vector<bool> can_lease(consumers, false);
  for (size_t i = 0; i < old.size(); ++i) {
    TaskState& task = *old[i];
    const int32_t c = static_cast<int32_t>(i % consumers);
    task.set_consumer(c);
    task.set_slot(next_slot[c]++);
    const auto next = u.next_index().find(task.task_id());
    task.set_start_index(next == u.next_index().end() ? 0 : next->second);
    // A copy's splits are its original's: the plan leased them once.
    if (task.copy_of() == 0) {
      for (const Split& split : task.leased()) {
        leased[c].push_back(plan_index.at(SerializeDeterministically(split)));
      }
    }
    // Read by another consumer now: a new generation (its definition and grants name it).
    Reassign(task, task.worker_id());
  }
  std::vector<ConsumerShare> shares = RedealShares(epoch, leased, consumers);
  epoch.clear_shares();
  for (ConsumerShare& share : shares) *epoch.add_shares() = std::move(share);
  std::map<std::string, int64_t> loads = LiveWorkerLoads();
  ShareOldTasks(epoch, old, consumers > u.from_consumers(), next_slot, loads);
  for (const TaskState* task : old) {
    can_lease[task->consumer()] =
        can_lease[task->consumer()] || (!task->finished() && !task->draining());
  }
  const int64_t remote = std::max<int64_t>(RemoteSlots(job), 1);
  for (int32_t c = 0; c < consumers; ++c) {
    if (can_lease[c] || !HandsOutSplitsTo(epoch, c)) continue;
    for (int64_t s = 0; s < remote && epoch.task_ids_size() < kMaxTasksPerEpoch; ++s) {
      AddTask(epoch, c, next_slot[c]++, /*local=*/false, std::nullopt, loads);
    }
  }
  return absl::OkStatus();
}

void DispatcherState::ShareOldTasks(EpochState& epoch, const std::vector<TaskState*>& old,
                                    bool growing, std::vector<int32_t>& next_slot,
                                    std::map<std::string, int64_t>& loads) {
  const int32_t consumers = epoch.shares_size();
  // A PUT epoch's tasks write cache chunks: a copy would write them twice.
  if (consumers < 2 || epoch.cache().mode() == EpochCache::PUT) return;
  // The old tasks that may hold elements nobody has read — finished with some past their start,
  // or still holding splits to produce — and the consumers that have something to read: such a
  // task, or splits of their share to lease.
  std::vector<TaskState*> unread;
  std::vector<bool> has_work(consumers, false);
  for (TaskState* task : old) {
    const ReadStride stride(task->read_stride(), task->read_offset());
    if (task->finished() ? stride.CountIn(task->start_index(), task->num_elements()) > 0
                         : task->leased_size() > 0) {
      unread.push_back(task);
      has_work[task->consumer()] = true;
    }
  }
  for (int32_t c = 0; c < consumers; ++c) has_work[c] = has_work[c] || HandsOutSplitsTo(epoch, c);
  if (unread.empty() ||
      (!growing && std::all_of(has_work.begin(), has_work.end(), [](bool b) { return b; }))) {
    return;
  }
  // Every consumer reads a part of each such task: the task keeps one, copies the others. Their
  // leases are final (draining): a copy computes the same splits as its original, index for
  // index, so neither may lease more; the rest of the shares goes to new tasks.
  for (TaskState* task : unread) {
    const ReadStride stride(task->read_stride(), task->read_offset());
    const int64_t original = task->copy_of() != 0 ? task->copy_of() : task->task_id();
    task->set_draining(true);
    task->set_read_stride(static_cast<int32_t>(stride.stride() * consumers));
    task->set_read_offset(static_cast<int32_t>(stride.offset()));
    for (int32_t j = 1; j < consumers; ++j) {
      const int32_t c = (task->consumer() + j) % consumers;
      TaskState& copy = AddTask(epoch, c, next_slot[c]++, /*local=*/false, std::nullopt, loads);
      *copy.mutable_leased() = task->leased();
      copy.set_draining(true);
      copy.set_start_index(task->start_index());
      copy.set_read_stride(task->read_stride());
      copy.set_read_offset(static_cast<int32_t>(stride.offset() + j * stride.stride()));
      copy.set_copy_of(original);
    }
  }
  // The copies have their elements to compute.
  epoch.set_finished(false);
}

const ConsumerLease* DispatcherState::FindLease(const JobState& job, int32_t consumer) {
  for (const ConsumerLease& lease : job.leases()) {
    if (lease.consumer() == consumer) return &lease;
  }
  return nullptr;
}

absl::Status DispatcherState::ValidateClaimConsumer(const ClaimConsumerUpdate& u) const {
  const JobState* job = FindJob(u.job_id());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", u.job_id()));
  if (u.consumer() < 0 || u.consumer() >= job->options().num_consumers()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", u.job_id(), " has ",
                                                   job->options().num_consumers(),
                                                   " consumers; no consumer ", u.consumer()));
  }
  if (u.reader_id().empty()) {
    return absl::InvalidArgumentError("a claim of a consumer names no reader id");
  }
  RETURN_IF_ERROR(ValidateName("reader id", u.reader_id()));
  RETURN_IF_ERROR(ValidateName("reader description", u.description()));
  const ConsumerLease* lease = FindLease(*job, u.consumer());
  if (lease == nullptr || lease->reader_id().empty()) return absl::OkStatus();
  if (lease->reader_id() == u.reader_id()) {
    return absl::AlreadyExistsError(absl::StrCat("reader ", u.reader_id(), " holds consumer ",
                                                 u.consumer(), " of job ", u.job_id(), " already"));
  }
  if (!u.takeover()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "consumer ", u.consumer(), " of job ", u.job_id(), " is held by reader ",
        lease->reader_id(), " (", lease->description(), ", generation ", lease->generation(), ")"));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyClaimConsumer(const ClaimConsumerUpdate& u) {
  ConsumerLease* lease = MutableLease(jobs_.find(u.job_id())->second, u.consumer());
  lease->set_reader_id(u.reader_id());
  lease->set_description(u.description());
  lease->set_generation(lease->generation() + 1);
  return absl::OkStatus();
}

ConsumerLease* DispatcherState::MutableLease(JobState& job, int32_t consumer) {
  for (ConsumerLease& lease : *job.mutable_leases()) {
    if (lease.consumer() == consumer) return &lease;
  }
  // Leases are listed in the order of their first claim: replay gives the same order.
  ConsumerLease* lease = job.add_leases();
  lease->set_consumer(consumer);
  return lease;
}

absl::Status DispatcherState::ValidateReleaseConsumer(const ReleaseConsumerUpdate& u) const {
  const JobState* job = FindJob(u.job_id());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", u.job_id()));
  const ConsumerLease* lease = FindLease(*job, u.consumer());
  if (lease == nullptr || lease->reader_id() != u.reader_id() || u.reader_id().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("reader ", u.reader_id(), " does not hold consumer ", u.consumer(), " of job ",
                     u.job_id(), ": nothing to release"));
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::ApplyReleaseConsumer(const ReleaseConsumerUpdate& u) {
  ConsumerLease* lease = MutableLease(jobs_.find(u.job_id())->second, u.consumer());
  lease->clear_reader_id();
  lease->clear_description();
  return absl::OkStatus();
}

TaskState& DispatcherState::AddTask(EpochState& epoch, int32_t consumer, int32_t slot,
                                    bool local, const std::optional<std::string>& worker_id,
                                    std::map<std::string, int64_t>& loads) {
  TaskState task;
  task.set_task_id(next_task_id_++);
  task.set_job_id(epoch.job_id());
  task.set_epoch(epoch.epoch());
  task.set_consumer(consumer);
  task.set_slot(slot);
  task.set_local(local);
  task.set_worker_id(worker_id.has_value() ? *worker_id : ChooseWorker(workers_, loads, task));
  task.set_generation(task.worker_id().empty() ? 0 : 1);
  if (!task.worker_id().empty()) ++loads[task.worker_id()];
  epoch.add_task_ids(task.task_id());
  IndexTask(task);
  GRANARY_HISTORY_RECORD("assign", "ok", TaskFields(task));
  const int64_t id = task.task_id();
  return tasks_.emplace(id, std::move(task)).first->second;
}

void DispatcherState::MoveTask(TaskState& task, std::map<std::string, int64_t>& loads) {
  const std::string target = ChooseWorker(workers_, loads, task);
  if (target.empty() && task.worker_id().empty()) return;
  Reassign(task, target);
  if (!target.empty() && !task.finished()) ++loads[target];
}

void DispatcherState::Reassign(TaskState& task, const std::string& worker_id) {
  ++task_moves_;
  UnindexTask(task);
  task.set_worker_id(worker_id);
  task.set_generation(task.generation() + 1);
  IndexTask(task);
  GRANARY_HISTORY_RECORD("assign", "ok", TaskFields(task));
}

void DispatcherState::IndexTask(const TaskState& task) {
  tasks_by_worker_[task.worker_id()].insert(task.task_id());
  if (!task.finished()) unfinished_tasks_by_worker_[task.worker_id()].insert(task.task_id());
}

void DispatcherState::UnindexTask(const TaskState& task) {
  for (auto* index : {&tasks_by_worker_, &unfinished_tasks_by_worker_}) {
    auto it = index->find(task.worker_id());
    if (it == index->end()) continue;
    it->second.erase(task.task_id());
    if (it->second.empty()) index->erase(it);
  }
}

std::map<std::string, int64_t> DispatcherState::LiveWorkerLoads() const {
  std::map<std::string, int64_t> loads;
  for (const auto& [id, w] : workers_) {
    if (w.lost()) continue;
    auto held = unfinished_tasks_by_worker_.find(id);
    loads[id] = held == unfinished_tasks_by_worker_.end() ? 0 : held->second.size();
  }
  return loads;
}

const DatasetState* DispatcherState::FindDataset(const std::string& dataset_id) const {
  auto it = datasets_.find(dataset_id);
  return it == datasets_.end() ? nullptr : &it->second;
}

const JobState* DispatcherState::FindJob(int64_t job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobState* DispatcherState::FindJobByName(const std::string& owner,
                                               const std::string& name) const {
  auto it = job_ids_by_name_.find({name, owner});
  return it == job_ids_by_name_.end() ? nullptr : FindJob(it->second);
}

const EpochState* DispatcherState::FindEpoch(int64_t job_id, int64_t epoch) const {
  auto it = epochs_.find({job_id, epoch});
  return it == epochs_.end() ? nullptr : &it->second;
}

const CacheState* DispatcherState::FindCache(const std::string& cache_key) const {
  auto it = caches_.find(cache_key);
  return it == caches_.end() ? nullptr : &it->second;
}

const TaskState* DispatcherState::FindTask(int64_t task_id) const {
  auto it = tasks_.find(task_id);
  return it == tasks_.end() ? nullptr : &it->second;
}

const WorkerState* DispatcherState::FindWorker(const std::string& worker_id) const {
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? nullptr : &it->second;
}

std::vector<const TaskState*> DispatcherState::UnfinishedTasksOfWorker(
    const std::string& worker_id) const {
  std::vector<const TaskState*> out;
  auto held = unfinished_tasks_by_worker_.find(worker_id);
  if (held == unfinished_tasks_by_worker_.end()) return out;
  for (int64_t id : held->second) out.push_back(&tasks_.find(id)->second);
  return out;
}

std::vector<const TaskState*> DispatcherState::TasksOfConsumer(int64_t job_id, int64_t epoch,
                                                               int32_t consumer) const {
  std::vector<const TaskState*> out;
  const EpochState* e = FindEpoch(job_id, epoch);
  if (e == nullptr) return out;
  for (int64_t id : e->task_ids()) {
    const TaskState* task = FindTask(id);
    if (task != nullptr && task->consumer() == consumer) out.push_back(task);
  }
  return out;
}

}  // namespace granary
