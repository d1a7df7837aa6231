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
#include "common/deterministic_serialization.h"
#include "common/failpoints.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "dispatcher/assignment_policy.h"
#include "dispatcher/policy/autoscaler.h"
#include "dispatcher/policy/placement.h"
#include "dispatcher/request_limits.h"
#include "dispatcher/state_invariants.h"
#include "glog/logging.h"
#include "pipeline/pipeline.h"

namespace granary {
namespace {

// A cache as a summary shows it: its state and counts without its manifest (the chunk list) and
// task plans, which grow with the dataset.
void StripManifest(CacheState* cache) {
  cache->clear_chunks();
  cache->clear_task_plans();
}

// A task's chunks must cover its elements at the cache point 0, 1, 2, ... without gap or
// overlap — all of its elements, when the cache point is the pipeline's end.
absl::Status CheckCacheChunks(const TaskFinishedRequest& request, bool put, bool whole_output,
                              const std::string& cache_dir) {
  if (!put) {
    if (request.cache_chunks_size() == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", request.task_id(), " reports cache chunks but its epoch writes no cache"));
  }
  int64_t next = 0;
  for (const CacheChunk& chunk : request.cache_chunks()) {
    // A chunk file directly in the cache's directory, named without a path of its own.
    const absl::string_view name = absl::StripPrefix(chunk.path(), cache_dir + "/");
    if (name.size() == chunk.path().size() || name.empty() || absl::StrContains(name, '/') ||
        name == "." || name == "..") {
      return absl::InvalidArgumentError(absl::StrCat("task ", request.task_id(), ": cache chunk '",
                                                     chunk.path(), "' is not a file of ",
                                                     cache_dir));
    }
    if (chunk.first_index() != next || chunk.num_elements() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task ", request.task_id(), ": cache chunk ", chunk.path(), " holds elements ",
          chunk.first_index(), "..", chunk.first_index() + chunk.num_elements() - 1,
          ", expected the next to start at ", next));
    }
    next += chunk.num_elements();
  }
  if (whole_output && next != request.num_elements()) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", request.task_id(), ": its cache chunks hold ", next,
                     " elements, the task produced ", request.num_elements()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DispatcherImpl>> DispatcherImpl::Open(
    const DispatcherOptions& options) {
  if (options.registries == nullptr) return absl::InvalidArgumentError("DispatcherOptions.registries unset");
  JournalOptions journal_options;
  journal_options.metrics = options.metrics;
  journal_options.accept_lost = options.new_cluster;
  ASSIGN_OR_RETURN(std::unique_ptr<Journal> journal,
                   Journal::Open(options.journal_dir, journal_options));
  std::unique_ptr<DispatcherImpl> impl(new DispatcherImpl(options, std::move(journal)));
  RETURN_IF_ERROR(impl->Recover());
  bool new_journal = false;
  {
    absl::MutexLock lock(&impl->mu_);
    impl->counters_.task_moves_at_open = impl->state_.task_moves();
    new_journal = impl->state_.applied_seq() == 0;
  }
  if (!options.cache_root.empty() && new_journal && !options.new_cluster) {
    RETURN_IF_ERROR(impl->CheckCacheRootUnowned());
  }
  RETURN_IF_ERROR(impl->NameCluster());
  if (!options.cache_root.empty()) {
    impl->ClaimCacheRoot();
    // Before any worker probes or writes: what no cache of the recovered state holds.
    absl::StatusOr<CacheGcCounts> collected;
    {
      absl::MutexLock lock(&impl->mu_);
      collected = CollectCacheGarbage(options.env, options.cache_root, impl->state_.caches());
    }
    if (!collected.ok()) {
      LOG(WARNING) << "cache root " << options.cache_root << ": " << collected.status();
    } else if (collected->files + collected->dirs > 0) {
      LOG(INFO) << "cache root " << options.cache_root << ": deleted " << collected->files
                << " stray files and " << collected->dirs << " directories";
    }
  }
  impl->liveness_thread_ = std::thread([d = impl.get()] { d->LivenessLoop(); });
  return impl;
}

DispatcherImpl::DispatcherImpl(const DispatcherOptions& options, std::unique_ptr<Journal> journal)
    : options_(options),
      journal_(std::move(journal)),
      confined_env_(options.data_roots.has_value()
                        ? std::make_unique<ConfinedEnv>(
                              options.env, options.data_roots->With(options.cache_root))
                        : nullptr),
      source_env_(confined_env_ != nullptr ? confined_env_.get() : options.env) {}

DispatcherImpl::~DispatcherImpl() {
  stopping_.Notify();
  if (liveness_thread_.joinable()) liveness_thread_.join();
}

absl::Status DispatcherImpl::Recover() {
  const uint64_t start = options_.env->NowMicros();
  ASSIGN_OR_RETURN(Journal::Recovered recovered, journal_->Recover());
  absl::MutexLock lock(&mu_);
  if (recovered.has_snapshot) {
    DispatcherStateProto proto;
    if (!proto.ParseFromString(recovered.snapshot)) {
      return absl::DataLossError(absl::StrCat("journal ", options_.journal_dir, ": snapshot at ",
                                              recovered.snapshot_seq, " does not parse"));
    }
    ASSIGN_OR_RETURN(state_, DispatcherState::FromProto(proto));
    RETURN_IF_ERROR(Annotate(
        CheckStateInvariants(state_),
        absl::StrCat("journal ", options_.journal_dir, ": snapshot at ", recovered.snapshot_seq)));
  }
  for (const auto& [seq, bytes] : recovered.records) {
    Update update;
    if (!update.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat("journal ", options_.journal_dir, ": record ", seq,
                                              " does not parse as an Update"));
    }
    // Apply's own status is informational (a no-op command); only ordering errors matter.
    const absl::Status status = state_.Apply(seq, update);
    if (state_.applied_seq() != seq) return status;
    if (options_.check_invariants) CheckInvariantsOrDie(seq);
  }
  if (!recovered.records.empty()) {
    RETURN_IF_ERROR(Annotate(CheckStateInvariants(state_),
                             absl::StrCat("journal ", options_.journal_dir, ": after replaying to ",
                                          state_.applied_seq())));
  }
  // Every known worker counts as freshly seen: no spurious loss right after a restart. Every
  // job counts as active, and every finished task as unread.
  const uint64_t now = options_.env->NowMicros();
  for (const auto& [id, worker] : state_.workers()) {
    if (!worker.lost()) last_seen_[id] = now;
  }
  for (const auto& [id, job] : state_.jobs()) last_active_[id] = now;
  for (const auto& [id, task] : state_.tasks()) {
    if (task.finished()) unread_finished_.insert(id);
  }
  LOG(INFO) << "dispatcher recovered " << recovered.records.size() << " journal records"
            << (recovered.has_snapshot
                    ? absl::StrCat(" after the snapshot at ", recovered.snapshot_seq)
                    : "")
            << " in " << (options_.env->NowMicros() - start) / 1000 << " ms";
  return absl::OkStatus();
}

void DispatcherImpl::MarkActive(int64_t job_id) {
  last_active_[job_id] = options_.env->NowMicros();
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

void DispatcherImpl::CheckInvariantsOrDie(uint64_t seq) const {
  const absl::Status status = CheckStateInvariants(state_);
  CHECK(status.ok()) << "after journal record " << seq << ": " << status;
}

absl::Status DispatcherImpl::NameCluster() {
  {
    absl::MutexLock lock(&mu_);
    if (!state_.cluster_id().empty()) return absl::OkStatus();
  }
  absl::BitGen random;
  Update update;
  update.mutable_set_cluster_id()->set_cluster_id(absl::StrFormat(
      "%016x%016x", absl::Uniform<uint64_t>(random), absl::Uniform<uint64_t>(random)));
  RETURN_IF_ERROR(JournalAndApply(update, [](const absl::Status&) { return absl::OkStatus(); }));
  absl::MutexLock lock(&mu_);
  LOG(INFO) << "new journal: cluster id " << state_.cluster_id();
  return absl::OkStatus();
}

absl::Status DispatcherImpl::CheckUsable() const {
  if (!journal_failure_.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "dispatcher stopped after a journal failure (restart it): ", journal_failure_.message()));
  }
  return absl::OkStatus();
}

absl::Status DispatcherImpl::JournalAndApply(const Update& update, const Answer& answer) {
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckUsable());
  }
  absl::StatusOr<uint64_t> seq = journal_->Append(SerializeDeterministically(update));
  if (absl::IsUnavailable(seq.status())) {
    // Not written (a full disk), and the journal makes sure it never will be: nothing to apply,
    // no fail-stop. The client retries; the journal resumes once space is freed — or, if its
    // files were deleted under it, refuses every later append the same way (its own fail-stop).
    LOG_EVERY_N(WARNING, 100) << "journal append refused, state unchanged: " << seq.status();
    return seq.status();
  }
  // An injected error here is an apply that cannot happen: like a failed append, it stops the
  // dispatcher (the record is durable; a restart replays it).
  if (seq.ok()) {
    if (absl::Status injected = HitFailpoint(kJournalAfterWriteBeforeApply); !injected.ok()) {
      seq = injected;
    }
  }
  absl::Status answered;
  std::optional<Snapshot> snapshot;
  {
    absl::MutexLock lock(&mu_);
    if (!seq.ok()) {
      if (journal_failure_.ok()) journal_failure_ = seq.status();
      LOG(ERROR) << "journal append failed; the dispatcher stops changing state: " << seq.status();
      return CheckUsable();
    }
    // Apply in sequence order: wait for every earlier record's writer to apply its own (or for
    // a journal failure, after which an earlier record may never be applied).
    struct Turn {
      const DispatcherImpl* self;
      uint64_t previous;
    } turn{this, *seq - 1};
    mu_.Await(absl::Condition(
        +[](Turn* t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->self->mu_) {
          return t->self->state_.applied_seq() == t->previous || !t->self->journal_failure_.ok();
        },
        &turn));
    RETURN_IF_ERROR(CheckUsable());
    const absl::Status applied = state_.Apply(*seq, update);
    if (options_.check_invariants) CheckInvariantsOrDie(*seq);
    ++records_since_snapshot_;
    answered = answer(applied);
    snapshot = SnapshotIfDue();
  }
  // Written outside the lock (leveldb's LogAndApply writes its MANIFEST so): a large state's
  // write and fsync never stall the RPCs.
  if (snapshot.has_value()) RETURN_IF_ERROR(WriteSnapshot(*snapshot));
  return answered;
}

std::optional<DispatcherImpl::Snapshot> DispatcherImpl::SnapshotIfDue() {
  if (records_since_snapshot_ < options_.snapshot_every || snapshot_in_flight_) {
    return std::nullopt;
  }
  snapshot_in_flight_ = true;
  records_since_snapshot_ = 0;
  return Snapshot{state_.applied_seq(), SerializeDeterministically(state_.ToProto())};
}

absl::Status DispatcherImpl::WriteSnapshot(const Snapshot& snapshot) {
  const absl::Status status = journal_->WriteSnapshot(snapshot.seq, snapshot.bytes);
  absl::MutexLock lock(&mu_);
  snapshot_in_flight_ = false;
  if (absl::IsUnavailable(status)) {
    // Not written (a full disk): the records stay in the journal; retried after the next one.
    LOG_EVERY_N(WARNING, 100) << "journal snapshot postponed: " << status;
    records_since_snapshot_ = options_.snapshot_every;
    return absl::OkStatus();
  }
  if (!status.ok()) {
    if (journal_failure_.ok()) journal_failure_ = status;
    LOG(ERROR) << "journal snapshot failed; the dispatcher stops changing state: " << status;
    return CheckUsable();
  }
  return absl::OkStatus();
}

absl::Status DispatcherImpl::RegisterDataset(const RegisterDatasetRequest& request,
                                             RegisterDatasetResponse* response) {
  // The cache's ops and fields are the dispatcher's to insert (cache/cache_policy.h).
  const PipelineDef& def = request.pipeline();
  if (def.source().type() == "cache_read" || def.cached_ops() != 0) {
    return absl::InvalidArgumentError(
        "invalid pipeline: source cache_read (and cached_ops) are inserted by the dispatcher; "
        "give the job a cache_policy instead");
  }
  for (int i = 0; i < def.ops_size(); ++i) {
    if (def.ops(i).op() == "cache_write") {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid pipeline: op ", i,
          " (cache_write) is inserted by the dispatcher; give the job a cache_policy instead"));
    }
  }
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
  auto pipeline = Pipeline::Create(request.pipeline(), *options_.registries);
  if (!pipeline.ok()) return Annotate(pipeline.status(), "invalid pipeline");
  const std::string dataset_id = HashToHex((*pipeline)->Fingerprint());
  response->set_dataset_id(dataset_id);
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckUsable());
    if (state_.FindDataset(dataset_id) != nullptr) return absl::OkStatus();
  }
  // A new dataset's file patterns must match files now, not when an epoch starts. (A known one
  // is not checked again: its files may be gone while a complete cache serves it.)
  const absl::Status files = (*pipeline)->CheckFiles(source_env_);
  if (!files.ok()) return Annotate(files, "invalid pipeline");
  Update update;
  update.mutable_register_dataset()->set_dataset_id(dataset_id);
  *update.mutable_register_dataset()->mutable_pipeline() = request.pipeline();
  return JournalAndApply(update, [](const absl::Status&) { return absl::OkStatus(); });
}

absl::Status DispatcherImpl::GetOrCreateJob(const GetOrCreateJobRequest& request,
                                            GetOrCreateJobResponse* response,
                                            const Caller& caller) {
  const auto answer_existing = [&](const JobState& job)
                                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    RETURN_IF_ERROR(CheckJobAccess(job, caller));
    if (job.dataset_id() != request.dataset_id()) {
      return absl::FailedPreconditionError(absl::StrCat("job '", job.name(),
                                                        "' exists for dataset ", job.dataset_id(),
                                                        ", not ", request.dataset_id()));
    }
    response->set_job_id(job.job_id());
    *response->mutable_options() = job.options();
    response->set_epochs_started(job.epochs_started());
    // The cache its next epoch would use, as that epoch would decide now.
    const absl::StatusOr<EpochCache> next =
        DecideEpochCache(job, state_.FindDataset(job.dataset_id())->pipeline());
    if (next.ok() && !next->cache_key().empty()) {
      response->set_cache_key(next->cache_key());
      if (const CacheState* cache = state_.FindCache(next->cache_key())) {
        *response->mutable_cache() = *cache;
        StripManifest(response->mutable_cache());
      }
    }
    MarkActive(job.job_id());
    // A cache_policy auto job's profile starts now: the trainer's own start-up hides it.
    if (job.options().cache_policy() == CACHE_AUTO && !job.has_cache_decision()) {
      AskForProfile(job.job_id());
    }
    return absl::OkStatus();
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
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckUsable());
    if (state_.FindDataset(request.dataset_id()) == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("no dataset ", request.dataset_id(), " (register the pipeline first)"));
    }
    if (!request.name().empty()) {
      ASSIGN_OR_RETURN(const JobState* job, FindNamedJob(request.name(), request.owner(), caller));
      if (job != nullptr) return answer_existing(*job);
    }
    RETURN_IF_ERROR(CheckClientLimits(caller, request.options()));
    const CachePolicy policy = request.options().cache_policy();
    if (policy != CACHE_COMPUTE) {
      if (options_.cache_root.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("cache_policy ", CachePolicyName(policy),
                         " needs a dispatcher started with --cache_root"));
      }
      const absl::Status point =
          PinnedPrefixOps(state_.FindDataset(request.dataset_id())->pipeline(), policy).status();
      if (!point.ok()) return Annotate(point, absl::StrCat("dataset ", request.dataset_id()));
    }
  }
  Update update;
  update.mutable_create_job()->set_name(request.name());
  update.mutable_create_job()->set_dataset_id(request.dataset_id());
  *update.mutable_create_job()->mutable_options() = request.options();
  update.mutable_create_job()->set_owner(caller.owner());
  return JournalAndApply(
      update, [&](const absl::Status& applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        if (const JobState* named = request.name().empty()
                                        ? nullptr
                                        : state_.FindJobByName(caller.owner(), request.name())) {
          return answer_existing(*named);
        }
        RETURN_IF_ERROR(applied);
        return answer_existing(*state_.FindJob(state_.next_job_id() - 1));
      });
}

absl::StatusOr<const JobState*> DispatcherImpl::FindNamedJob(const std::string& name,
                                                             const std::string& owner,
                                                             const Caller& caller) const {
  if (owner.empty() || owner == caller.owner()) return state_.FindJobByName(caller.owner(), name);
  const JobState* job = state_.FindJobByName(owner, name);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("no job '", name, "' of owner '", owner, "'"));
  }
  RETURN_IF_ERROR(CheckJobAccess(*job, caller));
  return job;
}

absl::Status DispatcherImpl::CheckClientLimits(const Caller& caller,
                                               const JobOptions& options) const {
  if (caller.owner().empty()) return absl::OkStatus();
  int64_t jobs = 0;
  int64_t readers = 0;
  for (const auto& [id, job] : state_.jobs()) {
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
  // A cache decision may be overtaken by another epoch's (the update is then Aborted): decide
  // again, at most a few times.
  for (int attempt = 0;; ++attempt) {
    PipelineDef def;
    uint64_t seed;
    Update update;
    StartEpochUpdate* start = update.mutable_start_epoch();
    {
      absl::MutexLock lock(&mu_);
      // The cache waits below release mu_: after one, everything is looked up again.
      for (bool waited_for_put = false;;) {
        RETURN_IF_ERROR(CheckUsable());
        const JobState* job = state_.FindJob(request.job_id());
        if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", request.job_id()));
        RETURN_IF_ERROR(CheckJobAccess(*job, caller));
        MarkActive(request.job_id());
        if (const EpochState* epoch = state_.FindEpoch(request.job_id(), request.epoch())) {
          response->set_num_tasks(epoch->task_ids_size());
          return absl::OkStatus();
        }
        if (request.epoch() != job->epochs_started()) {
          return absl::FailedPreconditionError(
              absl::StrCat("job ", request.job_id(), ": the next epoch is ", job->epochs_started(),
                           ", not ", request.epoch()));
        }
        if (job->options().cache_policy() == CACHE_AUTO && !job->has_cache_decision()) {
          RETURN_IF_ERROR(AwaitCacheDecision(request.job_id()));  // OK once decided.
          continue;
        }
        def = state_.FindDataset(job->dataset_id())->pipeline();
        seed = job->options().seed();
        ASSIGN_OR_RETURN(*start->mutable_cache(), DecideEpochCache(*job, def));
        if (!waited_for_put && AwaitOwnPut(request.job_id(), start->cache())) {
          waited_for_put = true;
          continue;
        }
        break;
      }
      if (start->cache().mode() == EpochCache::GET) {
        for (Split& split : ChunkSplits(state_.FindCache(start->cache().cache_key())->chunks())) {
          *start->add_plan() = std::move(split);
        }
      }
    }
    start->set_job_id(request.job_id());
    start->set_epoch(request.epoch());
    if (start->cache().mode() != EpochCache::GET) {
      // Enumerate the split plan outside the lock: it lists files. A cached prefix always
      // reads epoch 0's plan (cache/cache_policy.h).
      ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> pipeline, Pipeline::Create(def, *options_.registries));
      auto splits = pipeline->EnumerateSplits(source_env_);
      if (!splits.ok()) {
        return Annotate(splits.status(), absl::StrCat("job ", request.job_id(), " epoch ",
                                                      request.epoch(), ": enumerating splits"));
      }
      const bool pinned =
          !start->cache().cache_key().empty() || start->cache().cached_prefix_ops() > 0;
      const int64_t plan_epoch = pinned ? 0 : request.epoch();
      for (Split& split : pipeline->PlanEpoch(std::move(splits).value(), seed, plan_epoch)) {
        *start->add_plan() = std::move(split);
      }
    }
    if (start->cache().mode() == EpochCache::PUT) {
      RETURN_IF_ERROR(options_.env->CreateDirs(start->cache().cache_dir()));
    }
    bool overtaken = false;
    RETURN_IF_ERROR(JournalAndApply(
        update,
        [&](const absl::Status& applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
          const EpochState* epoch = state_.FindEpoch(request.job_id(), request.epoch());
          overtaken = absl::IsAborted(applied) && epoch == nullptr;
          if (epoch == nullptr)
            return overtaken ? absl::OkStatus() : applied;  // e.g. past num_epochs.
          if (applied.ok()) ++counters_.epochs_started[epoch->cache().mode()];
          response->set_num_tasks(epoch->task_ids_size());
          return absl::OkStatus();
        }));
    if (!overtaken) return absl::OkStatus();
    if (attempt >= 3) {
      return absl::AbortedError(
          absl::StrCat("job ", request.job_id(), " epoch ", request.epoch(),
                       ": the cache changed under every attempt to start it"));
    }
  }
}

absl::Status DispatcherImpl::RegisterWorker(const RegisterWorkerRequest& request,
                                            RegisterWorkerResponse* response) {
  if (request.worker_id().empty() || request.address().empty()) {
    return absl::InvalidArgumentError("RegisterWorker needs a worker_id and an address");
  }
  RETURN_IF_ERROR(ValidateName("worker id", request.worker_id()));
  RETURN_IF_ERROR(ValidateName("worker address", request.address()));
  RETURN_IF_ERROR(ValidateShmNonce(request.shm_nonce()));
  {
    // Two registrations racing past this check both register (the later one wins the id).
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(RefuseDuplicateWorker(request, options_.env->NowMicros()));
  }
  if (request.local_job_id() != 0) {
    absl::MutexLock lock(&mu_);
    const JobState* job = state_.FindJob(request.local_job_id());
    if (job == nullptr || request.local_consumer() < 0 ||
        request.local_consumer() >= std::max(job->options().num_consumers(), 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker ", request.worker_id(), " registers as local to job ", request.local_job_id(),
          " consumer ", request.local_consumer(), ", which does not exist"));
    }
  }
  Update update;
  update.mutable_register_worker()->set_worker_id(request.worker_id());
  update.mutable_register_worker()->set_address(request.address());
  update.mutable_register_worker()->set_standby(request.standby());
  update.mutable_register_worker()->set_local_job_id(request.local_job_id());
  update.mutable_register_worker()->set_local_consumer(request.local_consumer());
  update.mutable_register_worker()->set_take_over_load(request.take_over_load());
  update.mutable_register_worker()->set_shm_nonce(request.shm_nonce());
  return JournalAndApply(
      update, [&](const absl::Status& applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        RETURN_IF_ERROR(applied);
        response->set_incarnation(state_.FindWorker(request.worker_id())->incarnation());
        response->set_cluster_id(state_.cluster_id());
        if (options_.capability_key.has_value()) {
          response->set_capability_key(options_.capability_key->bytes());
        }
        for (const std::string& admin : options_.admin_clients) response->add_admin_clients(admin);
        last_seen_[request.worker_id()] = options_.env->NowMicros();
        return absl::OkStatus();
      });
}

absl::Status DispatcherImpl::RefuseDuplicateWorker(const RegisterWorkerRequest& request,
                                                   uint64_t now) {
  const WorkerState* registered = state_.FindWorker(request.worker_id());
  if (registered == nullptr || registered->lost() || registered->address() == request.address()) {
    return absl::OkStatus();
  }
  const auto seen = last_seen_.find(request.worker_id());
  const uint64_t timeout_us = static_cast<uint64_t>(options_.worker_timeout_ms) * 1000;
  if (seen == last_seen_.end() || now - seen->second > timeout_us) return absl::OkStatus();
  ++counters_.duplicate_workers_refused;
  const absl::Status refused = absl::AlreadyExistsError(absl::StrCat(
      "worker id '", request.worker_id(), "' is registered by the live worker at ",
      registered->address(), " (heard from ", (now - seen->second) / 1000,
      " ms ago), so the worker at ", request.address(),
      " may not take it: are two workers started with the same --worker_id? (A worker restarted "
      "at a new address is accepted once the old one has been silent for ",
      options_.worker_timeout_ms, " ms, --worker_timeout_ms.)"));
  LOG(WARNING) << "RegisterWorker refused: " << refused.message();
  return refused;
}

const PipelineDef& DispatcherImpl::FillTaskDef(const TaskState& task, TaskDef* def) const {
  const JobState* job = state_.FindJob(task.job_id());
  const EpochCache& cache = state_.FindEpoch(task.job_id(), task.epoch())->cache();
  def->set_task_id(task.task_id());
  def->set_job_id(task.job_id());
  def->set_epoch(task.epoch());
  def->set_generation(task.generation());
  def->set_consumer(task.consumer());
  def->set_auto_order(job->options().auto_order());
  if (!job->owner().empty()) {
    def->add_readers(job->owner());
    def->mutable_readers()->MergeFrom(job->options().readers());
  }
  def->set_dataset_id(job->dataset_id());
  def->set_seed(job->options().seed());
  def->set_cached_prefix_ops(cache.cached_prefix_ops());
  def->set_cache_dir(cache.cache_dir());
  if (cache.mode() != EpochCache::COMPUTE) def->set_cache_root(options_.cache_root);
  if (!cache.has_pipeline()) {
    def->set_pipeline_key(job->dataset_id());
    return state_.FindDataset(job->dataset_id())->pipeline();
  }
  // The cache rewrite is a function of the dataset, the cache (its key names the cached
  // prefix and seed), the mode and the cache's directory.
  def->set_pipeline_key(absl::StrCat(job->dataset_id(), "/", EpochCache::Mode_Name(cache.mode()),
                                     "/", cache.cache_key(), "/", cache.cache_dir()));
  return cache.pipeline();
}

absl::Status DispatcherImpl::WorkerHeartbeat(const WorkerHeartbeatRequest& request,
                                             WorkerHeartbeatResponse* response) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckUsable());
  const WorkerState* worker = state_.FindWorker(request.worker_id());
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
  std::vector<const TaskState*> tasks = state_.UnfinishedTasksOfWorker(request.worker_id());
  for (int64_t id : unread_finished_) {
    const TaskState* task = state_.FindTask(id);
    if (task != nullptr && task->worker_id() == request.worker_id()) tasks.push_back(task);
  }
  std::sort(tasks.begin(), tasks.end(),
            [](const TaskState* a, const TaskState* b) { return a->task_id() < b->task_id(); });
  std::set<std::string> held(request.pipeline_keys().begin(), request.pipeline_keys().end());
  std::map<int64_t, int64_t> running;
  for (const RunningTask& r : request.running()) {
    running[r.task_id()] = r.generation();
    const TaskState* task = state_.FindTask(r.task_id());
    if (task != nullptr && task->generation() == r.generation() && !task->finished() &&
        task->worker_id() == request.worker_id() && r.produced() >= 0 && r.busy_us() >= 0) {
      metrics_.ProducerTotals(task->job_id(), task->task_id(), IsLocalWorker(*worker), r.produced(),
                              r.busy_us());
      activity_.TaskReport(task->task_id(), r.produced(), r.transport());
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
    const PipelineDef& pipeline = FillTaskDef(*task, def);
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
  AddCacheProfileRequests(*worker, response);
  // The answer's size is bounded (request_limits.h) below what a worker accepts, so a worker
  // seen here can read its tasks: being counted live never hides a worker that cannot.
  last_seen_[request.worker_id()] = options_.env->NowMicros();
  return absl::OkStatus();
}

absl::Status DispatcherImpl::ClientHeartbeat(const ClientHeartbeatRequest& request,
                                             ClientHeartbeatResponse* response,
                                             const Caller& caller) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckUsable());
  const JobState* job = state_.FindJob(request.job_id());
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", request.job_id()));
  RETURN_IF_ERROR(CheckJobAccess(*job, caller));
  const EpochState* epoch = state_.FindEpoch(request.job_id(), request.epoch());
  if (epoch == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("job ", request.job_id(), " has no epoch ", request.epoch()));
  }
  if (request.consumer() < 0 || request.consumer() >= job->options().num_consumers()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", request.job_id(), " has ",
                                                   job->options().num_consumers(),
                                                   " consumers; no consumer ", request.consumer()));
  }
  // The latest report counts, also when it is lower: a consumer resumed from an older saved
  // position needs again what its previous process had read.
  const std::vector<const TaskState*> tasks =
      state_.TasksOfConsumer(request.job_id(), request.epoch(), request.consumer());
  // Only the consumer's own tasks, so that no client can hide another's task from its worker
  // and what is kept stays bounded by the tasks that exist.
  for (const auto& [task_id, next_index] : request.next_index()) {
    const bool own = std::any_of(tasks.begin(), tasks.end(),
                                 [id = task_id](const TaskState* t) { return t->task_id() == id; });
    if (!own) {
      return absl::InvalidArgumentError(absl::StrCat(
          "client heartbeat: task ", task_id, " is not a task of job ", request.job_id(), " epoch ",
          request.epoch(), " consumer ", request.consumer()));
    }
    if (next_index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("client heartbeat: task ", task_id,
                                                     " next index ", next_index, " is negative"));
    }
  }
  MarkActive(request.job_id());
  for (const auto& [task_id, next_index] : request.next_index()) consumed_[task_id] = next_index;
  if (request.delivered() >= 0 && request.wait_us() >= 0 && request.step_us() >= 0) {
    const JobMetricsCollector::ReaderIncrease added =
        metrics_.ReaderTotals(request.job_id(), request.consumer(), request.delivered(),
                              request.wait_us(), request.step_us());
    activity_.AddDelivered(request.job_id(), added.delivered, added.wait_us, added.step_us,
                           options_.env->NowMicros());
  }
  for (const TaskState* task : tasks) {
    TrackUnread(*task);
    TaskInfo* info = response->add_tasks();
    info->set_task_id(task->task_id());
    info->set_slot(task->slot());
    const WorkerState* worker = state_.FindWorker(task->worker_id());
    if (worker != nullptr && !worker->lost()) {
      info->set_worker_address(worker->address());
      info->set_worker_shm_nonce(worker->shm_nonce());
    }
    info->set_generation(task->generation());
    info->set_finished(task->finished());
    info->set_num_elements(task->num_elements());
    if (options_.capability_key.has_value()) {
      info->set_capability(options_.capability_key->Mint(
          {task->job_id(), task->task_id(), task->consumer(), task->generation()}));
    }
  }
  // ScaleJob adds tasks only while the plan has splits to lease.
  response->set_tasks_final(!HandsOutSplits(*epoch));
  return absl::OkStatus();
}

absl::Status DispatcherImpl::ScaleJob(const ScaleJobRequest& request, ScaleJobResponse* response,
                                      const Caller& caller) {
  Update update;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckUsable());
    const JobState* job = nullptr;
    if (request.job_id() != 0) {
      job = state_.FindJob(request.job_id());
    } else {
      ASSIGN_OR_RETURN(job, FindNamedJob(request.job_name(), request.job_owner(), caller));
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
    MarkActive(job->job_id());
    update.mutable_scale_job()->set_job_id(job->job_id());
    update.mutable_scale_job()->set_num_worker_slots(request.num_worker_slots());
    update.mutable_scale_job()->set_num_local_slots(local);
    update.mutable_scale_job()->set_reason(request.reason());
  }
  RETURN_IF_ERROR(JournalAndApply(
      update, [&](const absl::Status& applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        RETURN_IF_ERROR(applied);
        const JobState* job = state_.FindJob(update.scale_job().job_id());
        for (int64_t e = job->epochs_started() - 1; e >= 0; --e) {
          const EpochState* epoch = state_.FindEpoch(job->job_id(), e);
          if (epoch == nullptr || epoch->finished()) continue;
          int32_t leasing = 0;
          for (const TaskState* task : state_.TasksOfConsumer(job->job_id(), e, 0)) {
            leasing += !task->finished() && !task->draining();
          }
          response->set_running_tasks_per_consumer(leasing);
          LOG(INFO) << "job " << job->job_id() << " scaled to " << job->options().num_worker_slots()
                    << " remote + " << job->options().num_local_slots()
                    << " local tasks per consumer (" << job->last_scaling() << "): epoch " << e
                    << " has " << epoch->task_ids_size() << " tasks, " << leasing
                    << " of consumer 0's leasing";
          break;
        }
        return absl::OkStatus();
      }));
  return HitFailpoint(kDispatcherAfterScaleBeforeReply);
}

absl::Status DispatcherImpl::GetSplits(const GetSplitsRequest& request,
                                       GetSplitsResponse* response) {
  if (request.max() < 1) return absl::InvalidArgumentError("GetSplits: max must be at least 1");
  const int64_t max = std::min(request.max(), kMaxSplitsPerLease);
  // Answers from the leases already made, if they reach from_seq. Returns false when a new
  // lease is needed.
  const auto answer = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<bool> {
    const TaskState* task = state_.FindTask(request.task_id());
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
    const EpochState* epoch = state_.FindEpoch(task->job_id(), task->epoch());
    // A shed task leases nothing more: it ends with what it holds.
    response->set_end_of_splits(task->draining() || epoch->next_split() == epoch->plan_size());
    return response->end_of_splits();
  };
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckUsable());
    ASSIGN_OR_RETURN(bool answered, answer());
    if (answered) return absl::OkStatus();
  }
  Update update;
  update.mutable_lease_splits()->set_task_id(request.task_id());
  update.mutable_lease_splits()->set_from_seq(request.from_seq());
  update.mutable_lease_splits()->set_max(max);
  RETURN_IF_ERROR(JournalAndApply(
      update, [&](const absl::Status&) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        return answer().status();
      }));
  return HitFailpoint(kDispatcherAfterLeaseBeforeReply);
}

absl::StatusOr<std::string> DispatcherImpl::TaskWorker(int64_t task_id) const {
  absl::MutexLock lock(&mu_);
  const TaskState* task = state_.FindTask(task_id);
  if (task == nullptr) return absl::NotFoundError(absl::StrCat("no task ", task_id));
  return task->worker_id();
}

absl::Status DispatcherImpl::TaskFinished(const TaskFinishedRequest& request,
                                          TaskFinishedResponse* response) {
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckUsable());
    const TaskState* task = state_.FindTask(request.task_id());
    if (task == nullptr) return absl::NotFoundError(absl::StrCat("no task ", request.task_id()));
    if (request.num_elements() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("task ", request.task_id(), " finished with ",
                                                     request.num_elements(), " elements"));
    }
    // A report that cannot change the state is not journaled (a flood of them would grow the
    // journal): a repeated one is acknowledged, one at another generation refused.
    if (task->finished()) {
      TrackUnread(*task);
      return absl::OkStatus();
    }
    if (request.generation() != task->generation()) {
      return absl::FailedPreconditionError(absl::StrCat("task ", request.task_id(),
                                                        " is at generation ", task->generation(),
                                                        ", not ", request.generation()));
    }
    {
      const EpochState* epoch = state_.FindEpoch(task->job_id(), task->epoch());
      const bool whole_output =
          epoch->cache().cache_point() ==
          state_.FindDataset(state_.FindJob(task->job_id())->dataset_id())->pipeline().ops_size();
      RETURN_IF_ERROR(CheckCacheChunks(request, epoch->cache().mode() == EpochCache::PUT,
                                       whole_output, epoch->cache().cache_dir()));
    }
  }
  Update update;
  update.mutable_task_finished()->set_task_id(request.task_id());
  update.mutable_task_finished()->set_generation(request.generation());
  update.mutable_task_finished()->set_num_elements(request.num_elements());
  *update.mutable_task_finished()->mutable_cache_chunks() = request.cache_chunks();
  std::string completed_cache;  // Set when this report completed a Put epoch's cache.
  RETURN_IF_ERROR(JournalAndApply(
      update, [&](const absl::Status& applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        if (const TaskState* task = state_.FindTask(request.task_id())) {
          TrackUnread(*task);
          metrics_.ForgetTask(task->job_id(), task->task_id());
          activity_.ForgetTask(task->task_id());
          const EpochState* epoch = state_.FindEpoch(task->job_id(), task->epoch());
          if (applied.ok() && epoch != nullptr && epoch->finished() &&
              epoch->cache().mode() == EpochCache::PUT) {
            completed_cache = epoch->cache().cache_key();
          }
        }
        return absl::IsAlreadyExists(applied) ? absl::OkStatus() : applied;
      }));
  if (completed_cache.empty()) return absl::OkStatus();
  // The report is durable; tidying the cache up is not its business (a failure is logged).
  const absl::Status tidied = AfterCacheComplete(completed_cache);
  if (!tidied.ok()) LOG(WARNING) << "cache " << completed_cache << ": " << tidied;
  return absl::OkStatus();
}

absl::Status DispatcherImpl::RecomputeCacheChunk(const RecomputeCacheChunkRequest& request,
                                                 RecomputeCacheChunkResponse* response) {
  Update update;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckUsable());
    const TaskState* task = state_.FindTask(request.task_id());
    if (task == nullptr) return absl::NotFoundError(absl::StrCat("no task ", request.task_id()));
    if (request.generation() != task->generation()) {
      return absl::FailedPreconditionError(absl::StrCat("task ", request.task_id(),
                                                        " is at generation ", task->generation(),
                                                        ", not ", request.generation()));
    }
    const EpochState* epoch = state_.FindEpoch(task->job_id(), task->epoch());
    const CacheState* cache = state_.FindCache(epoch->cache().cache_key());
    if (epoch->cache().mode() != EpochCache::GET || cache == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", request.task_id(), " does not read a cache"));
    }
    const auto chunk =
        std::find_if(cache->chunks().begin(), cache->chunks().end(),
                     [&](const CacheChunk& c) { return c.path() == request.chunk_path(); });
    if (chunk == cache->chunks().end()) {
      return absl::NotFoundError(
          absl::StrCat("cache ", cache->cache_key(), " has no chunk ", request.chunk_path()));
    }
    const auto plan =
        std::find_if(cache->task_plans().begin(), cache->task_plans().end(),
                     [&](const CacheTaskPlan& p) { return p.task_id() == chunk->task_id(); });
    if (plan == cache->task_plans().end()) {
      return absl::DataLossError(absl::StrCat("cache ", cache->cache_key(),
                                              " has no plan for task ", chunk->task_id(),
                                              ", which wrote ", chunk->path()));
    }
    const JobState* job = state_.FindJob(task->job_id());
    *response->mutable_prefix() = CachedPrefix(state_.FindDataset(job->dataset_id())->pipeline(),
                                               epoch->cache().cache_point());
    response->set_seed(job->options().seed());
    response->set_cached_prefix_ops(epoch->cache().cache_point());
    *response->mutable_leased() = plan->leased();
    *response->mutable_chunk() = *chunk;
    LOG(WARNING) << "task " << request.task_id() << " (worker " << task->worker_id()
                 << ") recomputes cache chunk " << request.chunk_path() << ": "
                 << request.problem();
    if (cache->invalid()) return absl::OkStatus();
    update.mutable_invalidate_cache()->set_cache_key(cache->cache_key());
    update.mutable_invalidate_cache()->set_reason(
        absl::StrCat("chunk ", request.chunk_path(), ": ", request.problem().substr(0, 1024)));
  }
  return JournalAndApply(
      update, [&](const absl::Status& applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        return absl::IsAlreadyExists(applied) ? absl::OkStatus() : applied;
      });
}

std::unique_ptr<ResourcePolicy> DispatcherImpl::NewPolicy(const JobState& job) const {
  const JobOptions& o = job.options();
  // As many local workers as every consumer has live; as many remote ones as the provisioner
  // may start (or are live now).
  std::map<int32_t, int32_t> local_per_consumer;
  int32_t remote = 0;
  for (const auto& [id, w] : state_.workers()) {
    if (w.lost()) continue;
    if (w.local_job_id() == job.job_id()) ++local_per_consumer[w.local_consumer()];
    if (!IsLocalWorker(w) && !w.standby()) ++remote;
  }
  const int32_t max_remote = std::max(provisioner_ != nullptr ? max_workers_ : remote, 1);
  int32_t max_local = 0;
  if (static_cast<int32_t>(local_per_consumer.size()) == std::max(o.num_consumers(), 1)) {
    max_local = INT32_MAX;
    for (const auto& [consumer, n] : local_per_consumer) max_local = std::min(max_local, n);
  }
  if (o.autoscale() == AUTOSCALE_CACHEW) {
    return std::make_unique<CachewAutoscaler>(CachewOptions{.max_workers = max_remote});
  }
  if (o.autoscale() == AUTOSCALE_MODEL) {
    return std::make_unique<ModelAutoscaler>(ModelOptions{.max_workers = max_remote});
  }
  PlacementOptions options;
  options.prices = options_.prices;
  options.max_local = max_local;
  options.max_remote = max_remote;
  if (o.placement() == PLACEMENT_PECAN) return std::make_unique<PecanPlacement>(options);
  return std::make_unique<ModelPlacement>(options);
}

absl::Status DispatcherImpl::RunPolicies() {
  std::vector<Update> steps;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckUsable());
    for (const auto& [id, job] : state_.jobs()) {
      const JobOptions& o = job.options();
      if (o.autoscale() == AUTOSCALE_NONE && o.placement() == PLACEMENT_STATIC) continue;
      // Only while an epoch is handing out splits: a step changes nothing else now, and an
      // epoch's tail (workers ending one by one) says nothing of the rates.
      bool running = false;
      for (int64_t e = 0; e < job.epochs_started(); ++e) {
        const EpochState* epoch = state_.FindEpoch(id, e);
        running = running || (epoch != nullptr && HandsOutSplits(*epoch));
      }
      if (!running) continue;
      std::optional<JobMetrics> metrics = metrics_.Take(id, kMinElementsPerDecision);
      if (!metrics.has_value()) continue;
      // The period after a step mixes the counts before and after it (joining workers start,
      // shed ones drain): it is not shown to the policy.
      if (settling_.erase(id) > 0) continue;
      metrics->local_workers = o.num_local_slots();
      metrics->remote_workers =
          o.num_local_slots() > 0 ? o.num_worker_slots() : std::max(o.num_worker_slots(), 1);
      std::unique_ptr<ResourcePolicy>& policy = policies_[id];
      if (policy == nullptr) policy = NewPolicy(job);
      const std::optional<ScalingDecision> decision = policy->Observe(*metrics);
      if (!decision.has_value()) continue;
      // An autoscaler decides remote workers only.
      const int32_t local =
          o.placement() == PLACEMENT_STATIC ? o.num_local_slots() : decision->local_workers;
      if (decision->remote_workers == metrics->remote_workers && local == o.num_local_slots()) {
        continue;
      }
      if (!ValidateScaling(id, decision->remote_workers, local, o.num_consumers()).ok()) continue;
      Update& step = steps.emplace_back();
      step.mutable_scale_job()->set_job_id(id);
      step.mutable_scale_job()->set_num_worker_slots(decision->remote_workers);
      step.mutable_scale_job()->set_num_local_slots(local);
      step.mutable_scale_job()->set_reason(decision->reason.substr(0, kMaxScalingReasonBytes));
      settling_.insert(id);
    }
  }
  for (const Update& step : steps) {
    RETURN_IF_ERROR(
        JournalAndApply(step, [&](const absl::Status& applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          if (applied.ok()) {
            LOG(INFO) << "job " << step.scale_job().job_id() << ": " << step.scale_job().reason()
                      << " -> " << step.scale_job().num_worker_slots() << " remote + "
                      << step.scale_job().num_local_slots() << " local tasks per consumer";
          }
          return absl::OkStatus();
        }));
  }
  return absl::OkStatus();
}

absl::Status DispatcherImpl::GetStatus(const GetStatusRequest& request, GetStatusResponse* response,
                                       const Caller& caller) {
  absl::MutexLock lock(&mu_);
  *response->mutable_state() = VisibleState(state_.ToProto(), caller);
  if (provisioner_ != nullptr) {
    // A request in flight (a local provisioner starting workers, a slow command) is shown as
    // the count requested: its workers may already be registering.
    const int32_t requested = ShownRequestedWorkers();
    response->set_provisioning(absl::StrCat(
        provisioner_->Describe(), ": ", requested, " workers requested (", min_workers_, "-",
        max_workers_, ")", asking_workers_ >= 0 ? ", the request in flight" : "",
        provisioning_.ok() ? ""
                           : absl::StrCat("; last request failed: ", provisioning_.message())));
    response->set_desired_workers(requested);
  }
  const uint64_t now = options_.env->NowMicros();
  for (const auto& [id, seen] : last_seen_) {
    const WorkerState* worker = state_.FindWorker(id);
    if (worker != nullptr && !worker->lost() &&
        now - seen <= static_cast<uint64_t>(options_.worker_timeout_ms) * 1000) {
      response->add_live_workers(id);
    }
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
  return CheckUsable();
}

absl::Status DispatcherImpl::CheckLiveness() {
  std::vector<Update> losses;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckUsable());
    const uint64_t now = options_.env->NowMicros();
    for (const auto& [id, worker] : state_.workers()) {
      auto seen = last_seen_.find(id);
      if (worker.lost() || seen == last_seen_.end()) continue;
      if (now - seen->second > static_cast<uint64_t>(options_.worker_timeout_ms) * 1000) {
        Update& update = losses.emplace_back();
        update.mutable_worker_lost()->set_worker_id(id);
        update.mutable_worker_lost()->set_incarnation(worker.incarnation());
      }
    }
  }
  for (const Update& update : losses) {
    LOG(WARNING) << "worker " << update.worker_lost().worker_id() << " incarnation "
                 << update.worker_lost().incarnation() << " silent for over "
                 << options_.worker_timeout_ms << " ms: declared lost, tasks reassigned";
    // A worker that re-registered meanwhile makes the update a no-op (stale incarnation).
    RETURN_IF_ERROR(JournalAndApply(update, [](const absl::Status&) { return absl::OkStatus(); }));
  }
  return absl::OkStatus();
}

absl::Status DispatcherImpl::RetireIdleJobs() {
  std::vector<std::pair<int64_t, std::vector<int64_t>>> idle;  // Job ids and their tasks.
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckUsable());
    const uint64_t now = options_.env->NowMicros();
    const uint64_t retention = static_cast<uint64_t>(options_.job_retention_ms) * 1000;
    for (const auto& [id, job] : state_.jobs()) {
      auto active = last_active_.find(id);
      if (active != last_active_.end() && now - active->second <= retention) continue;
      std::vector<int64_t> tasks;
      bool finished = true;
      for (int64_t e = 0; e < job.epochs_started() && finished; ++e) {
        const EpochState* epoch = state_.FindEpoch(id, e);
        finished = epoch != nullptr && epoch->finished();
        if (finished) tasks.insert(tasks.end(), epoch->task_ids().begin(), epoch->task_ids().end());
      }
      if (finished) idle.emplace_back(id, std::move(tasks));
    }
  }
  for (const auto& [job_id, tasks] : idle) {
    Update update;
    update.mutable_retire_job()->set_job_id(job_id);
    RETURN_IF_ERROR(JournalAndApply(
        update, [&, job = job_id, &tasks = tasks](const absl::Status& applied)
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                      if (!applied.ok()) return absl::OkStatus();  // Started a new epoch meanwhile.
                      LOG(INFO) << "job " << job << " idle for over " << options_.job_retention_ms
                                << " ms with every epoch finished: retired";
                      last_active_.erase(job);
                      metrics_.Forget(job);
                      activity_.Forget(job);
                      policies_.erase(job);
                      settling_.erase(job);
                      for (int64_t id : tasks) {
                        consumed_.erase(id);
                        unread_finished_.erase(id);
                        activity_.ForgetTask(id);
                      }
                      return absl::OkStatus();
                    }));
  }
  return absl::OkStatus();
}

void DispatcherImpl::LivenessLoop() {
  const absl::Duration period =
      absl::Milliseconds(std::max<int64_t>(options_.worker_timeout_ms / 4, 10));
  uint64_t last_policies_us = options_.env->NowMicros();
  while (!stopping_.WaitForNotificationWithTimeout(period)) {
    const absl::Status status = CheckLiveness();
    if (!status.ok()) LOG(ERROR) << "failure detector: " << status;
    const absl::Status retired = RetireIdleJobs();
    if (!retired.ok()) LOG(ERROR) << "retiring idle jobs: " << retired;
    const absl::Status overdue = DecideOverdueCaches();
    if (!overdue.ok()) LOG(ERROR) << "cache decisions: " << overdue;
    const uint64_t now = options_.env->NowMicros();
    if (now - last_policies_us >= static_cast<uint64_t>(options_.policy_period_ms) * 1000) {
      last_policies_us = now;
      const absl::Status scaled = RunPolicies();
      if (!scaled.ok()) LOG(ERROR) << "resource policies: " << scaled;
    }
    Provision();
  }
}

void DispatcherImpl::SetProvisioner(std::unique_ptr<Provisioner> provisioner, int32_t min_workers,
                                    int32_t max_workers) {
  absl::MutexLock lock(&mu_);
  provisioner_ = std::move(provisioner);
  min_workers_ = std::max(min_workers, 0);
  max_workers_ = std::max(max_workers, min_workers_);
  requested_workers_ = -1;
}

void DispatcherImpl::Provision() {
  Provisioner* provisioner;
  int32_t wanted = 0;
  std::vector<std::string> idle;
  {
    absl::MutexLock lock(&mu_);
    if (provisioner_ == nullptr || !CheckUsable().ok()) return;
    provisioner = provisioner_.get();
    // A worker for every unfinished remote task of an unfinished epoch.
    int64_t tasks = 0;
    for (const auto& [key, epoch] : state_.epochs()) {
      if (epoch.finished()) continue;
      for (int64_t id : epoch.task_ids()) {
        const TaskState* task = state_.FindTask(id);
        tasks += task != nullptr && !task->finished() && !task->local();
      }
    }
    wanted = static_cast<int32_t>(std::clamp<int64_t>(tasks, min_workers_, max_workers_));
    const uint64_t now = options_.env->NowMicros();
    const uint64_t period_us = static_cast<uint64_t>(options_.policy_period_ms) * 1000;
    if (wanted >= requested_workers_) lower_since_us_ = now;
    const bool retry = !provisioning_.ok() && now - last_provision_us_ >= period_us;
    // Shrinking waits until the count has stayed lower for three periods (an epoch's end and
    // the next one's start are moments apart).
    const bool shrink = wanted < requested_workers_ && now - lower_since_us_ >= 3 * period_us;
    // Workers busy when a shrink was asked for are stopped once idle: asked again.
    int32_t live_remote = 0;
    for (const auto& [id, worker] : state_.workers()) {
      // Standbys are not the provisioner's to stop (their own StatefulSet on Kubernetes).
      live_remote += !worker.lost() && !IsLocalWorker(worker) && !worker.standby();
    }
    const bool surplus = wanted < live_remote && now - last_provision_us_ >= 3 * period_us;
    if (!(wanted > requested_workers_ || shrink || retry || surplus)) return;
    last_provision_us_ = now;
    asking_workers_ = wanted;
    // Idle: holding no unfinished task, nor a finished one its consumer still reads.
    std::set<std::string> serving;
    for (int64_t id : unread_finished_) {
      if (const TaskState* t = state_.FindTask(id); t != nullptr) serving.insert(t->worker_id());
    }
    for (const auto& [id, worker] : state_.workers()) {
      if (worker.lost() || IsLocalWorker(worker) || serving.count(id) > 0) continue;
      if (state_.UnfinishedTasksOfWorker(id).empty()) idle.push_back(id);
    }
  }
  // Outside the lock: a command may take seconds.
  const absl::Status status = provisioner->Resize(wanted, idle);
  absl::MutexLock lock(&mu_);
  asking_workers_ = -1;
  if (status.ok()) {
    if (wanted != requested_workers_) {
      LOG(INFO) << "provisioner " << provisioner->Describe() << ": " << wanted << " workers";
    }
    requested_workers_ = wanted;
  } else {
    LOG(ERROR) << "provisioner " << provisioner->Describe() << ": " << status;
  }
  provisioning_ = status;
}

}  // namespace granary
