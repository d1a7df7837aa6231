// DispatcherImpl's worker-facing RPCs (dispatcher_impl.h): registration, heartbeats with their
// task definitions, split leases and task completion. Like every handler they check the
// request, propose an update to the core (dispatcher_core.h) and answer from the state.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/failpoints.h"
#include "common/status_macros.h"
#include "dispatcher/assignment_policy.h"
#include "dispatcher/consumer_shares.h"
#include "dispatcher/dispatcher_impl.h"
#include "dispatcher/request_limits.h"
#include "glog/logging.h"

namespace granary {

absl::Status DispatcherImpl::RegisterWorker(const RegisterWorkerRequest& request,
                                            RegisterWorkerResponse* response) {
  if (request.worker_id().empty() || request.address().empty()) {
    return absl::InvalidArgumentError("RegisterWorker needs a worker_id and an address");
  }
  RETURN_IF_ERROR(ValidateName("worker id", request.worker_id()));
  RETURN_IF_ERROR(ValidateName("worker address", request.address()));
  RETURN_IF_ERROR(ValidateShmNonce(request.shm_nonce()));
  RETURN_IF_ERROR(WithState([&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Two registrations racing past this check both register (the later one wins the id).
    RETURN_IF_ERROR(RefuseDuplicateWorker(state, request, options_.env->NowMicros()));
    if (request.local_job_id() == 0) return absl::OkStatus();
    const JobState* job = state.FindJob(request.local_job_id());
    if (job == nullptr || request.local_consumer() < 0 ||
        request.local_consumer() >= std::max(job->options().num_consumers(), 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker ", request.worker_id(), " registers as local to job ", request.local_job_id(),
          " consumer ", request.local_consumer(), ", which does not exist"));
    }
    return absl::OkStatus();
  }));
  Update update;
  update.mutable_register_worker()->set_worker_id(request.worker_id());
  update.mutable_register_worker()->set_address(request.address());
  update.mutable_register_worker()->set_standby(request.standby());
  update.mutable_register_worker()->set_local_job_id(request.local_job_id());
  update.mutable_register_worker()->set_local_consumer(request.local_consumer());
  update.mutable_register_worker()->set_take_over_load(request.take_over_load());
  update.mutable_register_worker()->set_shm_nonce(request.shm_nonce());
  return core_->Propose(update, [&](const DispatcherState& state) {
    response->set_incarnation(state.FindWorker(request.worker_id())->incarnation());
    response->set_cluster_id(state.cluster_id());
    if (options_.capability_key.has_value()) {
      response->set_capability_key(options_.capability_key->bytes());
    }
    for (const std::string& admin : options_.admin_clients) response->add_admin_clients(admin);
    liveness_.Seen(request.worker_id());
  });
}

absl::Status DispatcherImpl::RefuseDuplicateWorker(const DispatcherState& state,
                                                   const RegisterWorkerRequest& request,
                                                   uint64_t now) {
  const WorkerState* registered = state.FindWorker(request.worker_id());
  if (registered == nullptr || registered->lost() || registered->address() == request.address()) {
    return absl::OkStatus();
  }
  const std::optional<uint64_t> seen = liveness_.LastSeen(request.worker_id());
  const uint64_t timeout_us = static_cast<uint64_t>(options_.worker_timeout_ms) * 1000;
  if (!seen.has_value() || now - *seen > timeout_us) return absl::OkStatus();
  ++counters_.duplicate_workers_refused;
  const absl::Status refused = absl::AlreadyExistsError(absl::StrCat(
      "worker id '", request.worker_id(), "' is registered by the live worker at ",
      registered->address(), " (heard from ", (now - *seen) / 1000, " ms ago), so the worker at ",
      request.address(),
      " may not take it: are two workers started with the same --worker_id? (A worker restarted "
      "at a new address is accepted once the old one has been silent for ",
      options_.worker_timeout_ms, " ms, --worker_timeout_ms.)"));
  LOG(WARNING) << "RegisterWorker refused: " << refused.message();
  return refused;
}

const PipelineDef& DispatcherImpl::FillTaskDef(const DispatcherState& state, const TaskState& task,
                                               TaskDef* def) const {
  const JobState* job = state.FindJob(task.job_id());
  const EpochCache& cache = state.FindEpoch(task.job_id(), task.epoch())->cache();
  def->set_task_id(task.task_id());
  def->set_job_id(task.job_id());
  def->set_epoch(task.epoch());
  def->set_generation(task.generation());
  def->set_consumer(task.consumer());
  def->set_auto_order(job->options().auto_order());
  def->set_tail(job->options().tail());
  if (!job->owner().empty()) {
    def->add_readers(job->owner());
    def->mutable_readers()->MergeFrom(job->options().readers());
  }
  def->set_dataset_id(job->dataset_id());
  def->set_seed(job->options().seed());
  def->set_cached_prefix_ops(cache.cached_prefix_ops());
  def->set_cache_dir(cache.cache_dir());
  if (cache.mode() != EpochCache::COMPUTE) def->set_cache_root(options_.cache_root);
  // The key names the pipeline the worker runs: with auto_order, the one AutoOrder makes of what
  // is sent (a worker holding the pipeline as written for another job still needs it sent).
  const std::string reordered = job->options().auto_order() ? "/auto_order" : "";
  if (!cache.has_pipeline()) {
    def->set_pipeline_key(absl::StrCat(job->dataset_id(), reordered));
    return state.FindDataset(job->dataset_id())->pipeline();
  }
  // The cache rewrite is a function of the dataset, the cache (its key names the cached
  // prefix and seed), the mode and the cache's directory.
  def->set_pipeline_key(absl::StrCat(job->dataset_id(), "/", EpochCache::Mode_Name(cache.mode()),
                                     "/", cache.cache_key(), "/", cache.cache_dir(), reordered));
  return cache.pipeline();
}

absl::Status DispatcherImpl::WorkerHeartbeat(const WorkerHeartbeatRequest& request,
                                             WorkerHeartbeatResponse* response) {
  RETURN_IF_ERROR(core_->CheckUsable());
  return WithState(
      [&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        const WorkerState* worker = state.FindWorker(request.worker_id());
        if (worker == nullptr || worker->lost() || worker->incarnation() != request.incarnation()) {
          return absl::FailedPreconditionError(
              absl::StrCat("worker ", request.worker_id(), " incarnation ", request.incarnation(),
                           " is not registered (or was declared lost): register again"));
        }
        if (options_.capability_key.has_value()) {
          response->set_capability_key(options_.capability_key->bytes());
        }
        for (const std::string& admin : options_.admin_clients) response->add_admin_clients(admin);
        // Its unfinished tasks, and the finished ones their consumers still read, by task id.
        std::vector<const TaskState*> tasks = state.UnfinishedTasksOfWorker(request.worker_id());
        for (int64_t id : unread_finished_) {
          const TaskState* task = state.FindTask(id);
          if (task != nullptr && task->worker_id() == request.worker_id()) tasks.push_back(task);
        }
        std::sort(tasks.begin(), tasks.end(), [](const TaskState* a, const TaskState* b) {
          return a->task_id() < b->task_id();
        });
        std::set<std::string> held(request.pipeline_keys().begin(), request.pipeline_keys().end());
        std::map<int64_t, int64_t> running;
        for (const RunningTask& r : request.running()) {
          running[r.task_id()] = r.generation();
          const TaskState* task = state.FindTask(r.task_id());
          if (task != nullptr && task->generation() == r.generation() && !task->finished() &&
              task->worker_id() == request.worker_id() && r.produced() >= 0 && r.busy_us() >= 0) {
            policy_runner_.ProducerTotals(task->job_id(), task->task_id(), IsLocalWorker(*worker),
                                          r.produced(), r.busy_us());
            activity_.TaskReport(task->task_id(), r.produced(), r.transport());
            KnowAtLeast(task->task_id(), r.produced_through());
          }
        }
        int64_t pipeline_bytes = 0;
        for (const TaskState* task : tasks) {
          response->add_assigned_task_ids(task->task_id());
          auto run = running.find(task->task_id());
          if (run != running.end() && run->second == task->generation()) continue;
          if (response->tasks_size() >= kMaxTaskDefsPerHeartbeat) {
            response->set_more(true);
            continue;
          }
          TaskDef* def = response->add_tasks();
          const PipelineDef& pipeline = FillTaskDef(state, *task, def);
          if (held.count(def->pipeline_key())) continue;
          const int64_t size = pipeline.ByteSizeLong();
          if (pipeline_bytes > 0 && pipeline_bytes + size > kMaxHeartbeatPipelineBytes) {
            response->mutable_tasks()->RemoveLast();
            response->set_more(true);
            continue;
          }
          *def->mutable_pipeline() = pipeline;
          held.insert(def->pipeline_key());
          pipeline_bytes += size;
        }
        cache_->AddProfileRequests(state, *worker, response);
        // The answer's size is bounded (request_limits.h) below what a worker accepts, so a worker
        // seen here can read its tasks: being counted live never hides a worker that cannot.
        liveness_.Seen(request.worker_id());
        return absl::OkStatus();
      });
}

absl::Status DispatcherImpl::GetSplits(const GetSplitsRequest& request,
                                       GetSplitsResponse* response) {
  if (request.max() < 1) return absl::InvalidArgumentError("GetSplits: max must be at least 1");
  const int64_t max = std::min(request.max(), kMaxSplitsPerLease);
  // Answers from the leases already made, if they reach from_seq. Returns false when a new
  // lease is needed.
  const auto answer = [&](const DispatcherState& state) -> absl::StatusOr<bool> {
    const TaskState* task = state.FindTask(request.task_id());
    if (task == nullptr) return absl::NotFoundError(absl::StrCat("no task ", request.task_id()));
    const int64_t leased = task->leased_size();
    if (request.from_seq() < 0 || request.from_seq() > leased) {
      return absl::OutOfRangeError(absl::StrCat("task ", request.task_id(), " has ", leased,
                                                " splits leased; cannot answer from seq ",
                                                request.from_seq()));
    }
    response->Clear();
    const int64_t end = request.from_seq() + std::min(max, leased - request.from_seq());
    for (int64_t i = request.from_seq(); i < end; ++i) *response->add_splits() = task->leased(i);
    if (response->splits_size() > 0) return true;
    const EpochState* epoch = state.FindEpoch(task->job_id(), task->epoch());
    // A shed task leases nothing more: it ends with what it holds.
    response->set_end_of_splits(task->draining() || !HandsOutSplitsTo(*epoch, task->consumer()));
    return response->end_of_splits();
  };
  RETURN_IF_ERROR(core_->CheckUsable());
  ASSIGN_OR_RETURN(const bool answered, core_->Read(answer));
  if (answered) return absl::OkStatus();
  Update update;
  update.mutable_lease_splits()->set_task_id(request.task_id());
  update.mutable_lease_splits()->set_from_seq(request.from_seq());
  update.mutable_lease_splits()->set_max(max);
  absl::Status answered_after = absl::OkStatus();
  const absl::Status proposed = core_->Propose(
      update, [&](const DispatcherState& state) { answered_after = answer(state).status(); });
  if (absl::IsAlreadyExists(proposed) || absl::IsNotFound(proposed)) {
    // Refused (another lease from that position came first, the task is gone): the answer is
    // the leases made all the same, or why there are none.
    answered_after = core_->Read(answer).status();
  } else {
    RETURN_IF_ERROR(proposed);
  }
  RETURN_IF_ERROR(answered_after);
  return HitFailpoint(kDispatcherAfterLeaseBeforeReply);
}

absl::StatusOr<std::string> DispatcherImpl::TaskWorker(int64_t task_id) const {
  return core_->Read([&](const DispatcherState& state) -> absl::StatusOr<std::string> {
    const TaskState* task = state.FindTask(task_id);
    if (task == nullptr) return absl::NotFoundError(absl::StrCat("no task ", task_id));
    return task->worker_id();
  });
}

absl::Status DispatcherImpl::TaskFinished(const TaskFinishedRequest& request,
                                          TaskFinishedResponse* response) {
  RETURN_IF_ERROR(core_->CheckUsable());
  // Whether the report is to be journaled (a repeated one is not).
  ASSIGN_OR_RETURN(
      const bool report, WithState([&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                       mu_) -> absl::StatusOr<bool> {
        const TaskState* task = state.FindTask(request.task_id());
        if (task == nullptr)
          return absl::NotFoundError(absl::StrCat("no task ", request.task_id()));
        if (request.num_elements() < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "task ", request.task_id(), " finished with ", request.num_elements(), " elements"));
        }
        // A report that cannot change the state is not journaled (a flood of them would grow the
        // journal): a repeated one is acknowledged, one at another generation refused.
        if (task->finished()) {
          TrackUnread(*task);
          return false;
        }
        if (request.generation() != task->generation()) {
          return absl::FailedPreconditionError(
              absl::StrCat("task ", request.task_id(), " is at generation ", task->generation(),
                           ", not ", request.generation()));
        }
        {
          const EpochState* epoch = state.FindEpoch(task->job_id(), task->epoch());
          const bool whole_output =
              epoch->cache().cache_point() ==
              state.FindDataset(state.FindJob(task->job_id())->dataset_id())->pipeline().ops_size();
          RETURN_IF_ERROR(
              CacheCoordinator::CheckTaskChunks(request, epoch->cache().mode() == EpochCache::PUT,
                                                whole_output, epoch->cache().cache_dir()));
        }
        return true;
      }));
  if (!report) return absl::OkStatus();
  Update update;
  update.mutable_task_finished()->set_task_id(request.task_id());
  update.mutable_task_finished()->set_generation(request.generation());
  update.mutable_task_finished()->set_num_elements(request.num_elements());
  *update.mutable_task_finished()->mutable_cache_chunks() = request.cache_chunks();
  // The task's heartbeat measurements end with it.
  const auto forget_task = [&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const TaskState* task = state.FindTask(request.task_id());
    if (task == nullptr) return;
    TrackUnread(*task);
    policy_runner_.ForgetTask(task->job_id(), task->task_id());
    activity_.ForgetTask(task->task_id());
  };
  std::string completed_cache;  // Set when this report completed a Put epoch's cache.
  const absl::Status proposed = core_->Propose(update, [&](const DispatcherState& state) {
    absl::MutexLock lock(&mu_);
    forget_task(state);
    const TaskState* task = state.FindTask(request.task_id());
    const EpochState* epoch = state.FindEpoch(task->job_id(), task->epoch());
    if (epoch->finished() && epoch->cache().mode() == EpochCache::PUT) {
      completed_cache = epoch->cache().cache_key();
    }
  });
  if (!proposed.ok()) {
    // Refused by the state (finished meanwhile, moved to another generation): nothing changed.
    if (!absl::IsUnavailable(proposed)) WithState(forget_task);
    return OkIfAlreadyDone(proposed);
  }
  if (completed_cache.empty()) return absl::OkStatus();
  // The report is durable; tidying the cache up is not its business (a failure is logged).
  const absl::Status tidied = cache_->AfterCacheComplete(completed_cache);
  if (!tidied.ok()) LOG(WARNING) << "cache " << completed_cache << ": " << tidied;
  return absl::OkStatus();
}

}  // namespace granary
