#include "dispatcher/dispatcher_impl.h"

#include <algorithm>
#include <optional>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "cache/cache_gc.h"
#include "cache/cache_policy.h"
#include "common/failpoints.h"
#include "common/hash.h"
#include "common/read_stride.h"
#include "common/status_macros.h"
#include "dispatcher/assignment_policy.h"
#include "dispatcher/consumer_shares.h"
#include "dispatcher/durable_log.h"
#include "dispatcher/job_options_match.h"
#include "dispatcher/policy/autoscaler.h"
#include "dispatcher/policy/placement.h"
#include "dispatcher/python_function_grant.h"
#include "dispatcher/request_limits.h"
#include "glog/logging.h"
#include "journal/journal.h"
#include "pipeline/spec/pipeline_spec.h"

namespace granary {
namespace {

// A cache as a summary shows it: its state and counts without its manifest (the chunk list) and
// task plans, which grow with the dataset.
void StripManifest(CacheState* cache) {
  cache->clear_chunks();
  cache->clear_task_plans();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DispatcherImpl>> DispatcherImpl::Open(
    const DispatcherOptions& options) {
  if (options.registries == nullptr)
    return absl::InvalidArgumentError("DispatcherOptions.registries unset");
  JournalOptions journal_options;
  journal_options.metrics = options.metrics;
  journal_options.accept_lost = options.new_cluster;
  journal_options.file_system = options.journal_file_system;
  journal_options.sync_ledger = options.sync_ledger;
  ASSIGN_OR_RETURN(std::unique_ptr<Journal> journal,
                   Journal::Open(options.journal_dir, journal_options));
  ASSIGN_OR_RETURN(
      std::unique_ptr<DispatcherCore> core,
      DispatcherCore::Open(std::make_unique<JournalLog>(std::move(journal), options.journal_dir),
                           CoreOptions(options)));
  return Serve(options, std::move(core));
}

DispatcherCoreOptions DispatcherImpl::CoreOptions(const DispatcherOptions& options) {
  DispatcherCoreOptions core_options;
  core_options.snapshot_every = options.snapshot_every;
  core_options.check_invariants = options.check_invariants;
  core_options.env = options.env;
  return core_options;
}

absl::StatusOr<std::unique_ptr<DispatcherImpl>> DispatcherImpl::Serve(
    const DispatcherOptions& options, std::unique_ptr<DispatcherCore> core) {
  if (options.registries == nullptr)
    return absl::InvalidArgumentError("DispatcherOptions.registries unset");
  std::unique_ptr<DispatcherImpl> impl(new DispatcherImpl(options, std::move(core)));
  impl->StartFromRecoveredState();
  const bool new_journal =
      impl->core_->Read([](const DispatcherState& state) { return state.applied_seq() == 0; });
  if (!options.cache_root.empty() && new_journal && !options.new_cluster) {
    RETURN_IF_ERROR(impl->cache_->CheckRootUnowned(impl->core_->DescribeLog()));
  }
  RETURN_IF_ERROR(impl->NameCluster());
  if (!options.cache_root.empty()) {
    impl->cache_->ClaimRootAndCollectGarbage();
  }
  impl->liveness_thread_ = std::thread([d = impl.get()] { d->LivenessLoop(); });
  return impl;
}

DispatcherImpl::DispatcherImpl(const DispatcherOptions& options,
                               std::unique_ptr<DispatcherCore> core)
    : options_(options),
      core_(std::move(core)),
      cache_(std::make_unique<CacheCoordinator>(core_.get(), CacheOptions(options),
                                                [this] { return UnreadFinishedTasks(); })),
      liveness_(core_.get(), options.env, options.worker_timeout_ms),
      leases_(core_.get(), options.env, options.worker_timeout_ms),
      retention_(core_.get(), options.env, options.job_retention_ms,
                 [this](int64_t job, const std::vector<int64_t>& tasks) { ForgetJob(job, tasks); }),
      provisioning_(core_.get(), options.env, options.policy_period_ms,
                    [this] { return UnreadFinishedTasks(); }),
      policy_runner_(core_.get(), &provisioning_, options.prices),
      confined_env_(options.data_roots.has_value()
                        ? std::make_unique<ConfinedEnv>(
                              options.env, options.data_roots->With(options.cache_root))
                        : nullptr),
      source_env_(confined_env_ != nullptr ? confined_env_.get() : options.env) {}

CacheCoordinatorOptions DispatcherImpl::CacheOptions(const DispatcherOptions& options) {
  CacheCoordinatorOptions cache;
  cache.env = options.env;
  cache.cache_root = options.cache_root;
  cache.cache_capacity_bytes = options.cache_capacity_bytes;
  cache.cache_profile_records = options.cache_profile_records;
  cache.cache_profile_timeout_ms = options.cache_profile_timeout_ms;
  cache.cache_wait_ms = options.cache_wait_ms;
  if (options.data_roots.has_value()) {
    cache.data_roots_key = absl::StrJoin(options.data_roots->roots(), ",");
  }
  return cache;
}

DispatcherImpl::~DispatcherImpl() {
  stopping_.Notify();
  if (liveness_thread_.joinable()) liveness_thread_.join();
}

void DispatcherImpl::StartFromRecoveredState() {
  WithState([&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    counters_.task_moves_at_open = state.task_moves();
    liveness_.SeeAll(state);
    leases_.SeeAll(state);
    retention_.MarkAllActive(state);
    for (const auto& [id, task] : state.tasks()) {
      if (task.finished()) unread_finished_.insert(id);
    }
  });
}

std::set<int64_t> DispatcherImpl::UnreadFinishedTasks() const {
  absl::MutexLock lock(&mu_);
  return unread_finished_;
}

void DispatcherImpl::ForgetJob(int64_t job, const std::vector<int64_t>& tasks) {
  policy_runner_.Forget(job);
  leases_.Forget(job);
  absl::MutexLock lock(&mu_);
  activity_.Forget(job);
  for (int64_t id : tasks) {
    consumed_.erase(id);
    at_least_.erase(id);
    read_to_end_.erase(id);
    unread_finished_.erase(id);
    activity_.ForgetTask(id);
  }
}

void DispatcherImpl::KnowAtLeast(int64_t task_id, int64_t count) {
  int64_t& known = at_least_[task_id];
  known = std::max(known, count);
}

OtherShares DispatcherImpl::OthersOf(const DispatcherState& state, const JobState& job,
                                     const EpochState& epoch, int32_t consumer) const {
  std::vector<ConsumerCount> counts(std::max(job.options().num_consumers(), 1));
  std::vector<bool> all_finished(counts.size(), true);
  for (int64_t id : epoch.task_ids()) {
    const TaskState* task = state.FindTask(id);
    if (task == nullptr || task->consumer() < 0 ||
        task->consumer() >= static_cast<int32_t>(counts.size())) {
      continue;
    }
    int64_t known = 0;
    if (task->finished()) {
      known = task->num_elements();
    } else if (auto it = at_least_.find(id); it != at_least_.end()) {
      known = it->second;
    }
    // Elements before start_index went to a consumer of the job at its earlier count; a task
    // several consumers share counts the indices its reader reads.
    counts[task->consumer()].at_least +=
        ReadStride(task->read_stride(), task->read_offset()).CountIn(task->start_index(), known);
    // A task its reader read to its end is final too (its count is exact: at_least_ has it).
    all_finished[task->consumer()] =
        all_finished[task->consumer()] && (task->finished() || read_to_end_.count(id) > 0);
  }
  for (size_t c = 0; c < counts.size(); ++c) {
    counts[c].final = all_finished[c] && !HandsOutSplitsTo(epoch, static_cast<int32_t>(c));
  }
  return granary::OthersOf(consumer, counts, job.options().remainder());
}

void DispatcherImpl::TrackUnread(const TaskState& task) {
  if (!task.finished()) return;
  auto consumed = consumed_.find(task.task_id());
  if (consumed != consumed_.end() && consumed->second >= task.num_elements()) {
    unread_finished_.erase(task.task_id());
  } else {
    unread_finished_.insert(task.task_id());
  }
}

absl::Status DispatcherImpl::NameCluster() {
  if (!core_->Read([](const DispatcherState& state) { return state.cluster_id().empty(); })) {
    return absl::OkStatus();
  }
  absl::BitGen random;
  Update update;
  update.mutable_set_cluster_id()->set_cluster_id(absl::StrFormat(
      "%016x%016x", absl::Uniform<uint64_t>(random), absl::Uniform<uint64_t>(random)));
  return core_->Propose(update, [](const DispatcherState& state) {
    LOG(INFO) << "new journal: cluster id " << state.cluster_id();
  });
}

absl::Status DispatcherImpl::RegisterDataset(const RegisterDatasetRequest& request,
                                             RegisterDatasetResponse* response,
                                             const Caller& caller) {
  // The cache's ops and fields are the dispatcher's to insert (cache/cache_policy.h).
  RETURN_IF_ERROR(CacheCoordinator::CheckNoCacheOps(request.pipeline()));
  if (const int64_t bytes = static_cast<int64_t>(request.pipeline().ByteSizeLong());
      bytes > options_.limits.pipeline_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the pipeline has ", bytes, " bytes; the limit is ",
                     options_.limits.pipeline_bytes, " (--max_pipeline_bytes)"));
  }
  if (request.pipeline().ops_size() > options_.limits.pipeline_ops) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the pipeline has ", request.pipeline().ops_size(), " ops; the limit is ",
                     options_.limits.pipeline_ops, " (--max_pipeline_ops)"));
  }
  auto pipeline = PipelineSpec::Create(request.pipeline(), *options_.registries);
  if (!pipeline.ok()) return Annotate(pipeline.status(), "invalid pipeline");
  RETURN_IF_ERROR(
      CheckPythonFunctionGrant(request.pipeline(), caller, options_.python_udf_clients));
  const std::string dataset_id = HashToHex(pipeline->Fingerprint());
  response->set_dataset_id(dataset_id);
  Update update;
  update.mutable_register_dataset()->set_dataset_id(dataset_id);
  *update.mutable_register_dataset()->mutable_pipeline() = request.pipeline();
  RETURN_IF_ERROR(core_->CheckUsable());
  const absl::Status known =
      core_->Read([&](const DispatcherState& state) { return state.Validate(update); });
  if (absl::IsAlreadyExists(known)) return absl::OkStatus();
  // A new dataset's file patterns must match files now, not when an epoch starts. (A known one
  // is not checked again: its files may be gone while a complete cache serves it.)
  const absl::Status files = pipeline->CheckFiles(source_env_);
  if (!files.ok()) return Annotate(files, "invalid pipeline");
  return OkIfAlreadyDone(core_->Propose(update));
}

absl::Status DispatcherImpl::GetOrCreateJob(const GetOrCreateJobRequest& request,
                                            GetOrCreateJobResponse* response,
                                            const Caller& caller) {
  const auto answer_existing = [&](const DispatcherState& state, const JobState& job)
                                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    RETURN_IF_ERROR(CheckJobAccess(job, caller));
    if (job.dataset_id() != request.dataset_id()) {
      return absl::FailedPreconditionError(absl::StrCat("job '", job.name(),
                                                        "' exists for dataset ", job.dataset_id(),
                                                        ", not ", request.dataset_id()));
    }
    RETURN_IF_ERROR(CheckJobOptionsMatch(job, request.options()));
    response->set_job_id(job.job_id());
    *response->mutable_options() = job.options();
    response->set_epochs_started(job.epochs_started());
    // The cache its next epoch would use, as that epoch would decide now.
    const absl::StatusOr<EpochCache> next =
        cache_->DecideEpochCache(state, job, state.FindDataset(job.dataset_id())->pipeline());
    if (next.ok() && !next->cache_key().empty()) {
      response->set_cache_key(next->cache_key());
      if (const CacheState* cache = state.FindCache(next->cache_key())) {
        *response->mutable_cache() = *cache;
        StripManifest(response->mutable_cache());
      }
    }
    retention_.MarkActive(job.job_id());
    // A cache_policy auto job's profile starts now: the trainer's own start-up hides it.
    if (job.options().cache_policy() == CACHE_AUTO && !job.has_cache_decision()) {
      cache_->AskForProfile(job.job_id());
    }
    return absl::OkStatus();
  };
  // The job named in the request, if it exists, answered; nullopt if a new job is to be made.
  const auto answer_named = [&](const DispatcherState& state)
                                ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> std::optional<absl::Status> {
    if (request.name().empty()) return std::nullopt;
    ASSIGN_OR_RETURN(const JobState* job,
                     FindNamedJob(state, request.name(), request.owner(), caller));
    if (job == nullptr) return std::nullopt;
    return answer_existing(state, *job);
  };
  // Everything the job's update implies is checked before it is journaled: a journaled update
  // always applies.
  RETURN_IF_ERROR(ValidateJobOptions(request.options()));
  RETURN_IF_ERROR(ValidateName("job name", request.name()));
  RETURN_IF_ERROR(ValidateName("job owner", request.owner()));
  if (request.name().empty() && !request.owner().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job owner '", request.owner(), "' given without a job name"));
  }
  RETURN_IF_ERROR(ValidateName("dataset id", request.dataset_id()));
  RETURN_IF_ERROR(core_->CheckUsable());
  if (!request.resume_positions().empty()) {
    // Elastic resume: the job goes on at the request's number of consumers first.
    ASSIGN_OR_RETURN(const std::optional<Update> resume,
                     WithState([&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                   mu_) { return ResumeUpdate(state, request, caller); }));
    if (resume.has_value()) {
      const absl::Status resumed = core_->Propose(*resume);
      // AlreadyExists: another consumer's request resumed it first.
      if (!resumed.ok() && !absl::IsAlreadyExists(resumed)) return resumed;
    }
  }
  const std::optional<absl::Status> answered =
      WithState([&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                    mu_) -> std::optional<absl::Status> {
        if (state.FindDataset(request.dataset_id()) == nullptr) {
          return absl::NotFoundError(
              absl::StrCat("no dataset ", request.dataset_id(), " (register the pipeline first)"));
        }
        if (std::optional<absl::Status> named = answer_named(state)) return named;
        RETURN_IF_ERROR(CheckClientLimits(state, caller, request.options()));
        const CachePolicy policy = request.options().cache_policy();
        if (policy != CACHE_COMPUTE) {
          if (options_.cache_root.empty()) {
            return absl::FailedPreconditionError(
                absl::StrCat("cache_policy ", CachePolicyName(policy),
                             " needs a dispatcher started with --cache_root"));
          }
          const absl::Status point =
              PinnedPrefixOps(state.FindDataset(request.dataset_id())->pipeline(), policy).status();
          if (!point.ok()) return Annotate(point, absl::StrCat("dataset ", request.dataset_id()));
        }
        return std::nullopt;
      });
  if (answered.has_value()) return *answered;
  Update update;
  update.mutable_create_job()->set_name(request.name());
  update.mutable_create_job()->set_dataset_id(request.dataset_id());
  *update.mutable_create_job()->mutable_options() = request.options();
  update.mutable_create_job()->set_owner(caller.owner());
  absl::Status answer;
  const absl::Status proposed = core_->Propose(update, [&](const DispatcherState& state) {
    absl::MutexLock lock(&mu_);
    answer = answer_existing(state, *state.FindJob(state.next_job_id() - 1));
  });
  if (absl::IsAlreadyExists(proposed)) {
    // A job of that name was made meanwhile: that is the job.
    return WithState([&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return answer_named(state).value_or(proposed);
    });
  }
  RETURN_IF_ERROR(proposed);
  return answer;
}

absl::StatusOr<std::optional<Update>> DispatcherImpl::ResumeUpdate(
    const DispatcherState& state, const GetOrCreateJobRequest& request, const Caller& caller) {
  if (request.name().empty()) {
    return absl::InvalidArgumentError("resume positions need a job name (the job to resume)");
  }
  ASSIGN_OR_RETURN(const JobState* job,
                   FindNamedJob(state, request.name(), request.owner(), caller));
  if (job == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("job '", request.name(), "' to resume from positions does not exist"));
  }
  RETURN_IF_ERROR(CheckJobAccess(*job, caller));
  const int32_t from = job->options().num_consumers();
  const int32_t to = request.options().num_consumers();
  if (from == to) return std::nullopt;  // resumed already, or at the same count
  const std::string name = absl::StrCat("job '", request.name(), "'");
  if (request.resume_positions_size() != from) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " has ", from, " consumers; resuming it at ", to, " needs the positions of all ",
        from, ", not ", request.resume_positions_size()));
  }
  Update update;
  ResumeAtConsumersUpdate& u = *update.mutable_resume_at_consumers();
  u.set_job_id(job->job_id());
  u.set_epoch(request.resume_epoch());
  u.set_from_consumers(from);
  u.set_num_consumers(to);
  std::vector<bool> seen(from, false);
  for (const ClientPosition& position : request.resume_positions()) {
    const int32_t c = position.consumer();
    if (c < 0 || c >= from || seen[c]) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": the resume positions must be one per consumer 0 to ", from - 1,
                       "; consumer ", c, " is out of range or given twice"));
    }
    seen[c] = true;
    // A consumer that delivered nothing of the epoch sends an empty position of no job.
    const bool empty = position.job_id() == 0 && position.next_index().empty();
    if ((position.job_id() != job->job_id() && !empty) ||
        position.epoch() != request.resume_epoch()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": consumer ", c, "'s position is of job ", position.job_id(), " epoch ",
          position.epoch(), ", not job ", job->job_id(), " epoch ", request.resume_epoch()));
    }
    for (const auto& [task_id, next] : position.next_index()) {
      const TaskState* task = state.FindTask(task_id);
      if (task == nullptr || task->consumer() != c) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": consumer ", c, "'s position names task ", task_id, ", not one of its own"));
      }
      (*u.mutable_next_index())[task_id] = next;
    }
  }
  return update;
}

absl::StatusOr<const JobState*> DispatcherImpl::FindNamedJob(const DispatcherState& state,
                                                             const std::string& name,
                                                             const std::string& owner,
                                                             const Caller& caller) {
  if (owner.empty() || owner == caller.owner()) return state.FindJobByName(caller.owner(), name);
  const JobState* job = state.FindJobByName(owner, name);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("no job '", name, "' of owner '", owner, "'"));
  }
  RETURN_IF_ERROR(CheckJobAccess(*job, caller));
  return job;
}

absl::Status DispatcherImpl::CheckClientLimits(const DispatcherState& state, const Caller& caller,
                                               const JobOptions& options) const {
  if (caller.owner().empty()) return absl::OkStatus();
  int64_t jobs = 0;
  int64_t readers = 0;
  for (const auto& [id, job] : state.jobs()) {
    if (job.owner() != caller.owner()) continue;
    ++jobs;
    readers += job.options().num_consumers();
  }
  if (jobs + 1 > options_.limits.jobs) {
    return absl::ResourceExhaustedError(absl::StrCat("client '", caller.client, "' owns ", jobs,
                                                     " jobs; the limit is ", options_.limits.jobs,
                                                     " (--max_jobs_per_client)"));
  }
  if (readers + options.num_consumers() > options_.limits.readers) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "client '", caller.client, "' has ", readers, " consumers in its jobs and asks for ",
        options.num_consumers(), " more; the limit is ", options_.limits.readers,
        " (--max_readers_per_client)"));
  }
  return absl::OkStatus();
}

absl::Status DispatcherImpl::StartEpoch(const StartEpochRequest& request,
                                        StartEpochResponse* response, const Caller& caller) {
  ASSIGN_OR_RETURN(std::optional<EpochToStart> to_start,
                   AwaitEpochStartable(request, response, caller));
  if (!to_start.has_value()) return absl::OkStatus();  // Started already: answered.
  // The files are listed outside the locks, unless the epoch reads its cache (its chunks are its
  // plan); a PUT epoch's cache directory is made before its record is durable.
  std::optional<SplitPlan> plan;
  if (to_start->foreseen.mode() != EpochCache::GET) {
    ASSIGN_OR_RETURN(plan, PlanEpochSplits(request, *to_start));
  }
  if (to_start->foreseen.mode() == EpochCache::PUT) {
    RETURN_IF_ERROR(options_.env->CreateDirs(to_start->foreseen.cache_dir()));
  }
  bool plan_missing = false;
  absl::Status proposed = ProposeEpochStart(request, *to_start, plan, plan_missing, response);
  if (plan_missing) {
    // The complete cache the epoch was to read was evicted or invalidated meanwhile. Listed
    // now, the plan is there for whatever the epoch is decided to be: proposed once more, it
    // lacks nothing. (Should it be decided PUT, its workers make the directory: CachePut.)
    ASSIGN_OR_RETURN(plan, PlanEpochSplits(request, *to_start));
    proposed = ProposeEpochStart(request, *to_start, plan, plan_missing, response);
  }
  if (proposed.ok()) return absl::OkStatus();
  // Another consumer of the job started the epoch meanwhile: that is the epoch.
  return core_->Read([&](const DispatcherState& state) {
    const EpochState* epoch = state.FindEpoch(request.job_id(), request.epoch());
    if (epoch == nullptr) return proposed;
    response->set_num_tasks(epoch->task_ids_size());
    return absl::OkStatus();
  });
}

absl::StatusOr<std::optional<DispatcherImpl::EpochToStart>> DispatcherImpl::AwaitEpochStartable(
    const StartEpochRequest& request, StartEpochResponse* response, const Caller& caller) {
  // What the state says to do next.
  enum class Next { kAnswered, kAwaitDecision, kAwaitOwnPut, kStart };
  EpochToStart to_start;
  // The cache waits below are outside the locks: after one, everything is looked up again.
  for (bool waited_for_put = false;;) {
    RETURN_IF_ERROR(core_->CheckUsable());
    ASSIGN_OR_RETURN(
        const Next next, WithState([&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                       mu_) -> absl::StatusOr<Next> {
          const JobState* job = state.FindJob(request.job_id());
          if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", request.job_id()));
          RETURN_IF_ERROR(CheckJobAccess(*job, caller));
          retention_.MarkActive(request.job_id());
          if (const EpochState* epoch = state.FindEpoch(request.job_id(), request.epoch())) {
            response->set_num_tasks(epoch->task_ids_size());
            return Next::kAnswered;
          }
          if (request.epoch() != job->epochs_started()) {
            return absl::FailedPreconditionError(
                absl::StrCat("job ", request.job_id(), ": the next epoch is ",
                             job->epochs_started(), ", not ", request.epoch()));
          }
          if (job->options().cache_policy() == CACHE_AUTO && !job->has_cache_decision()) {
            return Next::kAwaitDecision;
          }
          to_start.def = state.FindDataset(job->dataset_id())->pipeline();
          to_start.seed = job->options().seed();
          ASSIGN_OR_RETURN(to_start.foreseen, cache_->DecideEpochCache(state, *job, to_start.def));
          // Everything but the plan is decided: what the state would refuse (an epoch past
          // num_epochs) is refused before the files are listed or a cache directory is made.
          RETURN_IF_ERROR(state.Validate(StartEpochOf(request, to_start.foreseen)));
          if (!waited_for_put &&
              CacheCoordinator::OwnPutRunning(state, request.job_id(), to_start.foreseen)) {
            return Next::kAwaitOwnPut;
          }
          return Next::kStart;
        }));
    switch (next) {
      case Next::kAnswered:
        return std::nullopt;
      case Next::kStart:
        return to_start;
      case Next::kAwaitDecision:
        RETURN_IF_ERROR(cache_->AwaitDecision(request.job_id()));  // OK once decided.
        break;
      case Next::kAwaitOwnPut:
        waited_for_put = true;
        cache_->AwaitCacheWritten(to_start.foreseen.cache_key());
        break;
    }
  }
}

Update DispatcherImpl::StartEpochOf(const StartEpochRequest& request, const EpochCache& cache) {
  Update update;
  StartEpochUpdate* start = update.mutable_start_epoch();
  start->set_job_id(request.job_id());
  start->set_epoch(request.epoch());
  *start->mutable_cache() = cache;
  return update;
}

absl::StatusOr<DispatcherImpl::SplitPlan> DispatcherImpl::PlanEpochSplits(
    const StartEpochRequest& request, const EpochToStart& to_start) const {
  ASSIGN_OR_RETURN(const PipelineSpec pipeline,
                   PipelineSpec::Create(to_start.def, *options_.registries));
  auto splits = pipeline.EnumerateSplits(source_env_);
  if (!splits.ok()) {
    return Annotate(splits.status(), absl::StrCat("job ", request.job_id(), " epoch ",
                                                  request.epoch(), ": enumerating splits"));
  }
  // A cached prefix always reads epoch 0's plan (cache/cache_policy.h). Whether the epoch
  // is pinned so does not depend on the cache's mode, only on the job: the foreseen decision
  // says it as the final one will.
  const bool pinned =
      !to_start.foreseen.cache_key().empty() || to_start.foreseen.cached_prefix_ops() > 0;
  SplitPlan plan;
  for (Split& split :
       pipeline.PlanEpoch(std::move(splits).value(), to_start.seed, pinned ? 0 : request.epoch())) {
    *plan.Add() = std::move(split);
  }
  return plan;
}

absl::Status DispatcherImpl::ProposeEpochStart(const StartEpochRequest& request,
                                               const EpochToStart& to_start,
                                               std::optional<SplitPlan>& plan, bool& plan_missing,
                                               StartEpochResponse* response) {
  plan_missing = false;
  return core_->Propose(
      [&](const DispatcherState& state) -> absl::StatusOr<Update> {
        const JobState* job = state.FindJob(request.job_id());
        if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", request.job_id()));
        ASSIGN_OR_RETURN(EpochCache cache, cache_->DecideEpochCache(state, *job, to_start.def));
        Update update = StartEpochOf(request, cache);
        StartEpochUpdate* start = update.mutable_start_epoch();
        if (cache.mode() == EpochCache::GET) {
          for (Split& split : ChunkSplits(state.FindCache(cache.cache_key())->chunks())) {
            *start->add_plan() = std::move(split);
          }
        } else if (plan.has_value()) {
          *start->mutable_plan() = std::move(*plan);
        } else {
          plan_missing = true;
          return absl::AbortedError(absl::StrCat("job ", request.job_id(), " epoch ",
                                                 request.epoch(), ": its splits are not listed"));
        }
        return update;
      },
      [&](const DispatcherState& state) {
        const EpochState* epoch = state.FindEpoch(request.job_id(), request.epoch());
        absl::MutexLock lock(&mu_);
        ++counters_.epochs_started[epoch->cache().mode()];
        response->set_num_tasks(epoch->task_ids_size());
      });
}

absl::Status DispatcherImpl::ClaimConsumer(const ClaimConsumerRequest& request,
                                           ClaimConsumerResponse* response, const Caller& caller) {
  RETURN_IF_ERROR(core_->CheckUsable());
  RETURN_IF_ERROR(CheckCallerMayRead(request.job_id(), caller));
  return leases_.Claim(request, response);
}

absl::Status DispatcherImpl::ReleaseConsumer(const ReleaseConsumerRequest& request,
                                             const Caller& caller) {
  RETURN_IF_ERROR(core_->CheckUsable());
  RETURN_IF_ERROR(CheckCallerMayRead(request.job_id(), caller));
  return leases_.Release(request);
}

absl::Status DispatcherImpl::CheckCallerMayRead(int64_t job_id, const Caller& caller) const {
  return WithState([&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const JobState* job = state.FindJob(job_id);
    if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", job_id));
    return CheckJobAccess(*job, caller);
  });
}

absl::Status DispatcherImpl::ClientHeartbeat(const ClientHeartbeatRequest& request,
                                             ClientHeartbeatResponse* response,
                                             const Caller& caller) {
  RETURN_IF_ERROR(core_->CheckUsable());
  return WithState(
      [&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        const JobState* job = state.FindJob(request.job_id());
        if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", request.job_id()));
        RETURN_IF_ERROR(CheckJobAccess(*job, caller));
        const EpochState* epoch = state.FindEpoch(request.job_id(), request.epoch());
        if (epoch == nullptr) {
          return absl::NotFoundError(
              absl::StrCat("job ", request.job_id(), " has no epoch ", request.epoch()));
        }
        if (request.consumer() < 0 || request.consumer() >= job->options().num_consumers()) {
          return absl::InvalidArgumentError(
              absl::StrCat("job ", request.job_id(), " has ", job->options().num_consumers(),
                           " consumers; no consumer ", request.consumer()));
        }
        // The latest report counts, also when it is lower: a consumer resumed from an older saved
        // position needs again what its previous process had read.
        const std::vector<const TaskState*> tasks =
            state.TasksOfConsumer(request.job_id(), request.epoch(), request.consumer());
        // Only the consumer's own tasks, so that no client can hide another's task from its worker
        // and what is kept stays bounded by the tasks that exist.
        for (const auto& [task_id, next_index] : request.next_index()) {
          const bool own =
              std::any_of(tasks.begin(), tasks.end(),
                          [id = task_id](const TaskState* t) { return t->task_id() == id; });
          if (!own) {
            return absl::InvalidArgumentError(absl::StrCat(
                "client heartbeat: task ", task_id, " is not a task of job ", request.job_id(),
                " epoch ", request.epoch(), " consumer ", request.consumer()));
          }
          if (next_index < 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                "client heartbeat: task ", task_id, " next index ", next_index, " is negative"));
          }
        }
        for (const auto& [task_id, received] : request.received()) {
          if (request.next_index().count(task_id) == 0 || received < 0) {
            return absl::InvalidArgumentError(
                absl::StrCat("client heartbeat: task ", task_id, " received ", received,
                             ": not one of the tasks it reports, or negative"));
          }
        }
        for (const auto& [task_id, num_elements] : request.ended()) {
          if (request.next_index().count(task_id) == 0 || num_elements < 0) {
            return absl::InvalidArgumentError(
                absl::StrCat("client heartbeat: task ", task_id, " ended with ", num_elements,
                             " elements: not one of the tasks it reports, or negative"));
          }
        }
        // A well-formed report moves positions only if its reader holds the consumer.
        RETURN_IF_ERROR(leases_.CheckHolder(*job, request.consumer(), request.reader_id()));
        retention_.MarkActive(request.job_id());
        for (const auto& [task_id, next_index] : request.next_index()) {
          consumed_[task_id] = next_index;
          KnowAtLeast(task_id, next_index);
        }
        for (const auto& [task_id, received] : request.received()) KnowAtLeast(task_id, received);
        for (const auto& [task_id, num_elements] : request.ended()) {
          KnowAtLeast(task_id, num_elements);
          read_to_end_.insert(task_id);
        }
        if (request.delivered() >= 0 && request.wait_us() >= 0 && request.step_us() >= 0) {
          const JobMetricsCollector::ReaderIncrease added =
              policy_runner_.ReaderTotals(request.job_id(), request.consumer(), request.delivered(),
                                          request.wait_us(), request.step_us());
          activity_.AddDelivered(request.job_id(), added.delivered, added.wait_us, added.step_us,
                                 options_.env->NowMicros());
        }
        for (const TaskState* task : tasks) {
          TrackUnread(*task);
          TaskInfo* info = response->add_tasks();
          info->set_task_id(task->task_id());
          info->set_slot(task->slot());
          const WorkerState* worker = state.FindWorker(task->worker_id());
          if (worker != nullptr && !worker->lost()) {
            info->set_worker_address(worker->address());
            info->set_worker_shm_nonce(worker->shm_nonce());
          }
          info->set_generation(task->generation());
          info->set_finished(task->finished());
          info->set_num_elements(task->num_elements());
          info->set_start_index(task->start_index());
          info->set_read_stride(task->read_stride());
          info->set_read_offset(task->read_offset());
          if (options_.capability_key.has_value()) {
            info->set_capability(options_.capability_key->Mint(
                {task->job_id(), task->task_id(), task->consumer(), task->generation()}));
          }
        }
        // ScaleJob adds tasks to a consumer only while it has splits to lease.
        response->set_tasks_final(!HandsOutSplitsTo(*epoch, request.consumer()));
        // Also once the epoch has finished: then every count is final.
        if (EffectiveSharding(job->options()) == SHARDING_EQUAL &&
            job->options().remainder() != REMAINDER_UNEVEN) {
          *response->mutable_others() = OthersOf(state, *job, *epoch, request.consumer());
        }
        return absl::OkStatus();
      });
}

absl::Status DispatcherImpl::ScaleJob(const ScaleJobRequest& request, ScaleJobResponse* response,
                                      const Caller& caller) {
  Update update;
  RETURN_IF_ERROR(core_->CheckUsable());
  RETURN_IF_ERROR(WithState([&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                mu_) -> absl::Status {
    const JobState* job = nullptr;
    if (request.job_id() != 0) {
      job = state.FindJob(request.job_id());
    } else {
      ASSIGN_OR_RETURN(job, FindNamedJob(state, request.job_name(), request.job_owner(), caller));
    }
    if (job == nullptr) {
      return absl::NotFoundError(request.job_id() != 0
                                     ? absl::StrCat("no job ", request.job_id())
                                     : absl::StrCat("no job named '", request.job_name(), "'"));
    }
    RETURN_IF_ERROR(CheckJobAccess(*job, caller));
    const int32_t local = request.has_num_local_slots() ? request.num_local_slots()
                                                        : job->options().num_local_slots();
    RETURN_IF_ERROR(ValidateScaling(job->job_id(), request.num_worker_slots(), local,
                                    job->options().num_consumers()));
    if (static_cast<int64_t>(request.reason().size()) > kMaxScalingReasonBytes) {
      return absl::InvalidArgumentError(absl::StrCat("scaling reason of ", request.reason().size(),
                                                     " bytes; the limit is ",
                                                     kMaxScalingReasonBytes));
    }
    retention_.MarkActive(job->job_id());
    update.mutable_scale_job()->set_job_id(job->job_id());
    update.mutable_scale_job()->set_num_worker_slots(request.num_worker_slots());
    update.mutable_scale_job()->set_num_local_slots(local);
    update.mutable_scale_job()->set_reason(request.reason());
    return absl::OkStatus();
  }));
  RETURN_IF_ERROR(core_->Propose(update, [&](const DispatcherState& state) {
    const JobState* job = state.FindJob(update.scale_job().job_id());
    for (int64_t e = job->epochs_started() - 1; e >= 0; --e) {
      const EpochState* epoch = state.FindEpoch(job->job_id(), e);
      if (epoch == nullptr || epoch->finished()) continue;
      int32_t leasing = 0;
      for (const TaskState* task : state.TasksOfConsumer(job->job_id(), e, 0)) {
        leasing += !task->finished() && !task->draining();
      }
      response->set_running_tasks_per_consumer(leasing);
      LOG(INFO) << "job " << job->job_id() << " scaled to " << job->options().num_worker_slots()
                << " remote + " << job->options().num_local_slots() << " local tasks per consumer ("
                << job->last_scaling() << "): epoch " << e << " has " << epoch->task_ids_size()
                << " tasks, " << leasing << " of consumer 0's leasing";
      break;
    }
  }));
  return HitFailpoint(kDispatcherAfterScaleBeforeReply);
}

absl::Status DispatcherImpl::GetStatus(const GetStatusRequest& request, GetStatusResponse* response,
                                       const Caller& caller) {
  WithState([&](const DispatcherState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    *response->mutable_state() = VisibleState(state.ToProto(), caller);
    provisioning_.FillStatus(response);
    const uint64_t now = options_.env->NowMicros();
    for (std::string& id : liveness_.LiveWorkers(state, now)) {
      response->add_live_workers(std::move(id));
    }
    DispatcherStateProto& visible = *response->mutable_state();
    std::set<int64_t> visible_jobs;
    for (const JobState& job : visible.jobs()) visible_jobs.insert(job.job_id());
    for (const JobActivity& job : activity_.Jobs(now)) {
      if (visible_jobs.count(job.job_id())) *response->add_job_activity() = job;
    }
    for (const EpochState& epoch : visible.epochs()) {
      EpochProgress* progress = response->add_epoch_progress();
      progress->set_job_id(epoch.job_id());
      progress->set_epoch(epoch.epoch());
      progress->set_splits(epoch.plan_size());
      progress->set_leased(epoch.next_split());
    }
    for (const TaskState& task : visible.tasks()) {
      if (task.finished()) continue;
      TaskActivity* activity = response->add_task_activity();
      activity->set_task_id(task.task_id());
      activity->set_leased_splits(task.leased_size());
      activity_.FillTask(task.task_id(), activity);
      const auto delivered = consumed_.find(task.task_id());
      if (delivered != consumed_.end()) activity->set_delivered(delivered->second);
    }
    if (request.summary()) {
      for (DatasetState& dataset : *visible.mutable_datasets()) dataset.clear_pipeline();
      for (JobState& job : *visible.mutable_jobs()) {
        if (job.has_cache_decision()) job.mutable_cache_decision()->clear_profile();
      }
      for (EpochState& epoch : *visible.mutable_epochs()) {
        epoch.clear_plan();
        epoch.mutable_cache()->clear_pipeline();
      }
      for (TaskState& task : *visible.mutable_tasks()) {
        task.clear_leased();
        task.clear_cache_chunks();
      }
      for (CacheState& cache : *visible.mutable_caches()) StripManifest(&cache);
    }
  });
  return core_->CheckUsable();
}

void DispatcherImpl::LivenessLoop() {
  const absl::Duration period =
      absl::Milliseconds(std::max<int64_t>(options_.worker_timeout_ms / 4, 10));
  uint64_t last_policies_us = options_.env->NowMicros();
  while (!stopping_.WaitForNotificationWithTimeout(period)) {
    const absl::Status status = liveness_.CheckLiveness();
    if (!status.ok()) LOG(ERROR) << "failure detector: " << status;
    const absl::Status retired = retention_.RetireIdleJobs();
    if (!retired.ok()) LOG(ERROR) << "retiring idle jobs: " << retired;
    const absl::Status overdue = cache_->DecideOverdue();
    if (!overdue.ok()) LOG(ERROR) << "cache decisions: " << overdue;
    const uint64_t now = options_.env->NowMicros();
    if (now - last_policies_us >= static_cast<uint64_t>(options_.policy_period_ms) * 1000) {
      last_policies_us = now;
      const absl::Status scaled = policy_runner_.RunPolicies();
      if (!scaled.ok()) LOG(ERROR) << "resource policies: " << scaled;
    }
    provisioning_.Provision();
  }
}

}  // namespace granary
