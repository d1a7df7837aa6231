#include "worker/worker_impl.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cache/cache_profiler.h"
#include "cache/cache_run_hooks.h"
#include "common/deterministic_serialization.h"
#include "common/failpoints.h"
#include "common/history_log.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "pipeline/optimizer/auto_order.h"
#include "pipeline/trainer_tail.h"
#include "transport/compression.h"
#include "transport/grpc_transport.h"
#include "transport/shm_backing.h"
#include "transport/shm_transport.h"
#include "transport/transport_registry.h"

namespace granary {

namespace {

void AddCheckpointCounters(const TaskStatus& task, GetWorkerStatusResponse* totals) {
  totals->set_checkpoints_written(totals->checkpoints_written() + task.checkpoints_written());
  totals->set_checkpoint_bytes(totals->checkpoint_bytes() + task.checkpoint_bytes());
  totals->set_checkpoint_stall_us(totals->checkpoint_stall_us() + task.checkpoint_stall_us());
}

}  // namespace

absl::StatusOr<LocalTransport> ParseLocalTransport(absl::string_view name) {
  if (name == "auto") return LocalTransport::kAuto;
  if (name == "shm") return LocalTransport::kShm;
  if (name == "tcp") return LocalTransport::kTcp;
  return absl::InvalidArgumentError(
      absl::StrCat("local transport '", name, "' is none of auto, shm, tcp"));
}

absl::StatusOr<std::unique_ptr<WorkerImpl>> WorkerImpl::Start(
    const WorkerOptions& options, std::unique_ptr<DispatcherConnection> dispatcher,
    int64_t register_timeout_ms) {
  if (options.registries == nullptr)
    return absl::InvalidArgumentError("WorkerOptions.registries unset");
  std::unique_ptr<WorkerImpl> worker(new WorkerImpl(options, std::move(dispatcher)));
  ElementServerOptions transport;
  transport.worker_address = options.address;
  transport.segment_min_bytes = static_cast<size_t>(std::max<int64_t>(options.shm_min_bytes, 0));
  const TransportRegistry& transports = TransportRegistry::BuiltIn();
  if (options.local_transport != LocalTransport::kTcp) {
    absl::StatusOr<std::unique_ptr<ElementServer>> shm =
        transports.StartServer(kShmTransport, transport);
    if (shm.ok()) {
      worker->element_server_ = *std::move(shm);
    } else if (options.local_transport == LocalTransport::kShm) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--local_transport=shm: no shared memory on this host: ", shm.status().message()));
    } else {
      LOG(WARNING) << "worker " << options.worker_id
                   << ": serving local clients over TCP: " << shm.status();
    }
  }
  if (worker->element_server_ == nullptr) {
    ASSIGN_OR_RETURN(worker->element_server_, transports.StartServer(kTcpTransport, transport));
  }
  Env* const env = options.runner.env;
  const uint64_t deadline = env->NowMicros() + static_cast<uint64_t>(register_timeout_ms) * 1000;
  absl::Status status;
  while (!(status = worker->Register()).ok()) {
    const bool id_taken = absl::IsAlreadyExists(status);
    if (!id_taken && !absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status)) {
      return status;
    }
    if (env->NowMicros() > deadline) {
      return Annotate(status, "registering with the dispatcher: gave up");
    }
    if (id_taken) LOG(WARNING) << "registering: " << status.message() << "; retrying";
    env->SleepForMicros(id_taken ? 1'000'000 : 100'000);
  }
  worker->heartbeat_thread_ = std::thread([w = worker.get()] { w->HeartbeatLoop(); });
  return worker;
}

WorkerImpl::WorkerImpl(const WorkerOptions& options,
                       std::unique_ptr<DispatcherConnection> dispatcher)
    : options_(options), dispatcher_(std::move(dispatcher)) {}

WorkerImpl::~WorkerImpl() {
  stopping_.Notify();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  if (profile_thread_.joinable()) profile_thread_.join();
  std::map<int64_t, std::shared_ptr<TaskRunner>> runners;
  {
    absl::MutexLock lock(&mu_);
    runners.swap(runners_);
  }
  runners.clear();  // Joins the producers outside mu_.
}

absl::Status WorkerImpl::Register() {
  RegisterWorkerRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_address(options_.address);
  element_server_->Advertise(&request);
  request.set_standby(options_.standby);
  request.set_local_job_id(options_.local_job_id);
  request.set_local_consumer(options_.local_consumer);
  request.set_take_over_load(options_.take_over_load);
  ASSIGN_OR_RETURN(RegisterWorkerResponse response, dispatcher_->RegisterWorker(request));
  // Destroyed outside mu_, the runners before the store they use.
  std::unique_ptr<CheckpointStore> old_checkpoints;
  std::map<int64_t, std::shared_ptr<TaskRunner>> old_runners;
  absl::MutexLock lock(&mu_);
  if (response.cluster_id() != cluster_id_) {
    // A new cluster (or the first): its task ids are not the previous one's, so nothing of
    // the previous one may be served or restored under them.
    if (!cluster_id_.empty()) {
      LOG(WARNING) << "the dispatcher is now cluster " << response.cluster_id() << ", not "
                   << cluster_id_ << ": dropping " << runners_.size() << " tasks";
    }
    old_runners.swap(runners_);
    pipelines_.clear();
    old_checkpoints = std::move(checkpoints_);
    if (!options_.checkpoint_dir.empty()) {
      ASSIGN_OR_RETURN(checkpoints_,
                       CheckpointStore::Open(
                           options_.runner.env, options_.checkpoint_dir,
                           {.keep = options_.checkpoints_kept, .owner = response.cluster_id()}));
    }
    cluster_id_ = response.cluster_id();
  }
  incarnation_ = response.incarnation();
  UpdateCapabilityKey(response.capability_key());
  admin_clients_.assign(response.admin_clients().begin(), response.admin_clients().end());
  LOG(INFO) << "worker " << options_.worker_id << " registered at " << options_.address
            << " as incarnation " << incarnation_ << (options_.standby ? " (standby)" : "");
  return absl::OkStatus();
}

int64_t WorkerImpl::incarnation() const {
  absl::MutexLock lock(&mu_);
  return incarnation_;
}

absl::StatusOr<std::shared_ptr<const Pipeline>> WorkerImpl::PipelineFor(const TaskDef& def) {
  // The key names the pipeline as run: with auto_order, reordered (the dispatcher's key says so).
  const std::string& key = def.pipeline_key();
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second.pipeline;
  if (!def.has_pipeline()) {
    return absl::InternalError(absl::StrCat("the dispatcher sent task ", def.task_id(),
                                            " without its pipeline ", def.pipeline_key(),
                                            ", which this worker does not hold"));
  }
  PipelineDef pipeline_def = def.pipeline();
  if (def.auto_order()) {
    // The reordered pipeline gives the same bytes; one that cannot be profiled runs as written.
    absl::StatusOr<PipelineDef> reordered =
        AutoOrder(pipeline_def, *options_.registries, options_.runner.env);
    if (reordered.ok()) {
      pipeline_def = *std::move(reordered);
      LOG(INFO) << "dataset " << def.dataset_id() << ": AutoOrder runs its ops as "
                << DescribeOrder(pipeline_def);
    } else {
      LOG(WARNING) << "dataset " << def.dataset_id()
                   << ": running as written: " << reordered.status();
    }
  }
  if (options_.parallel_map_threads > 0) {
    pipeline_def = WithParallelMapThreads(pipeline_def, options_.parallel_map_threads);
  }
  PipelineOptions pipeline_options;
  pipeline_options.autotune = options_.autotune;
  auto pipeline = Pipeline::Create(pipeline_def, *options_.registries, pipeline_options);
  if (!pipeline.ok()) {
    return Annotate(pipeline.status(), absl::StrCat("dataset ", def.dataset_id()));
  }
  std::shared_ptr<const Pipeline> shared = std::move(pipeline).value();
  HeldPipeline& held = pipelines_[key];
  held = HeldPipeline{shared};
  // A tail that cannot be split off (its split fails to validate) stays on the worker.
  absl::StatusOr<std::optional<TrainerTailSplit>> split =
      SplitTrainerTail(pipeline_def, *options_.registries);
  if (!split.ok()) {
    LOG(WARNING) << "dataset " << def.dataset_id()
                 << ": its trainer-side tail stays on the worker: " << split.status();
  } else if (split->has_value()) {
    held.tail = (*split)->tail;
    held.without_tail = std::make_shared<LazyPipeline>();
    held.without_tail->def = std::move((*split)->worker);
    held.without_tail->options = pipeline_options;
  }
  return shared;
}

std::optional<TrainerTailOffer> WorkerImpl::TrainerTailOfferFor(const TaskDef& def) {
  const HeldPipeline& held = pipelines_.at(def.pipeline_key());
  if (!held.tail.has_value() || def.tail() == TAIL_WORKER) return std::nullopt;
  TrainerTailOffer offer;
  offer.when = def.tail();
  offer.tail = *held.tail;
  offer.pipeline = [lazy = held.without_tail, registries = options_.registries,
                    dataset =
                        def.dataset_id()]() -> absl::StatusOr<std::shared_ptr<const Pipeline>> {
    absl::MutexLock lock(&lazy->mu);
    if (lazy->built == nullptr) {
      absl::StatusOr<std::unique_ptr<Pipeline>> built =
          Pipeline::Create(lazy->def, *registries, lazy->options);
      if (!built.ok()) {
        return Annotate(built.status(),
                        absl::StrCat("dataset ", dataset, " without its trainer-side tail"));
      }
      lazy->built = *std::move(built);
    }
    return lazy->built;
  };
  return offer;
}

void WorkerImpl::ReportFinished(const TaskDef& def, int64_t num_elements,
                                const std::vector<CacheChunk>& cache_chunks) {
  TaskFinishedRequest request;
  request.set_task_id(def.task_id());
  request.set_generation(def.generation());
  request.set_num_elements(num_elements);
  for (const CacheChunk& chunk : cache_chunks) *request.add_cache_chunks() = chunk;
  int backoff_ms = 20;
  while (!stopping_.HasBeenNotified()) {
    const absl::Status status = dispatcher_->TaskFinished(request);
    if (status.ok()) return;
    if (!absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status)) {
      // Another generation owns the task now: its own runner reports.
      LOG(WARNING) << "task " << def.task_id() << " finished report refused: " << status;
      return;
    }
    options_.runner.env->SleepForMicros(static_cast<uint64_t>(backoff_ms) * 1000);
    backoff_ms = std::min(backoff_ms * 2, 1000);
  }
}

void WorkerImpl::StartCacheProfile(const CacheProfileRequest& request) {
  if (stopping_.HasBeenNotified() || profiling_.exchange(true)) return;
  if (profile_thread_.joinable()) profile_thread_.join();  // Done: profiling_ was false.
  profile_thread_ = std::thread([this, request] {
    ProfileCache(request);
    profiling_ = false;
  });
}

void WorkerImpl::ProfileCache(const CacheProfileRequest& request) {
  CacheProfilerOptions options;
  options.env = options_.runner.env;
  options.registries = options_.registries;
  options.stop = &stopping_;
  // The probe writes under the cache root; the source reads where tasks may.
  std::unique_ptr<ConfinedEnv> confined;
  if (options_.runner.data_roots.has_value()) {
    confined = std::make_unique<ConfinedEnv>(options_.runner.env,
                                             options_.runner.data_roots->With(request.probe_dir()));
    options.env = confined.get();
  }
  ReportCacheProfileRequest report;
  report.set_worker_id(options_.worker_id);
  report.set_job_id(request.job_id());
  absl::StatusOr<CacheProfile> profile = ProfileCachePoints(request, options);
  if (stopping_.HasBeenNotified()) return;  // Not the pipeline's fault: another worker profiles.
  if (profile.ok()) {
    *report.mutable_profile() = *std::move(profile);
  } else {
    LOG(WARNING) << "job " << request.job_id()
                 << ": profiling for cache_policy auto: " << profile.status();
    report.set_error(profile.status().ToString());
  }
  const absl::StatusOr<ReportCacheProfileResponse> decided =
      dispatcher_->ReportCacheProfile(report);
  if (decided.ok()) {
    LOG(INFO) << "job " << request.job_id() << ": " << decided->decision().reason();
  } else {
    LOG(WARNING) << "job " << request.job_id() << ": cache profile report: " << decided.status();
  }
}

absl::Status WorkerImpl::Heartbeat() {
  // One heartbeat at a time (the loop's and those on demand), and no more than one per 10 ms.
  absl::MutexLock heartbeat_lock(&heartbeat_mu_);
  const uint64_t now = options_.runner.env->NowMicros();
  if (last_heartbeat_micros_.has_value() &&
      now - *last_heartbeat_micros_ < kMinHeartbeatIntervalMs * 1000) {
    return absl::OkStatus();
  }
  last_heartbeat_micros_ = now;
  WorkerHeartbeatRequest request;
  request.set_worker_id(options_.worker_id);
  {
    absl::MutexLock lock(&mu_);
    request.set_incarnation(incarnation_);
    for (const auto& [key, pipeline] : pipelines_) request.add_pipeline_keys(key);
    for (const auto& [id, runner] : runners_) {
      RunningTask* running = request.add_running();
      running->set_task_id(id);
      running->set_generation(runner->def().generation());
      const TaskStatus status = runner->Status();
      running->set_produced(status.made());
      running->set_produced_through(status.produced());
      running->set_busy_us(status.busy_us());
      running->set_transport(status.transport());
    }
  }
  absl::StatusOr<WorkerHeartbeatResponse> response = dispatcher_->WorkerHeartbeat(request);
  if (absl::IsFailedPrecondition(response.status())) {
    LOG(WARNING) << "dispatcher no longer knows this worker (" << response.status()
                 << "): registering again";
    return Register();
  }
  RETURN_IF_ERROR(response.status());
  std::vector<std::shared_ptr<TaskRunner>> retired;  // Destroyed outside mu_.
  // Destroyed outside mu_ too: a Python UDF's helpers take a moment to end.
  std::vector<std::shared_ptr<const Pipeline>> dropped_pipelines;
  absl::ReleasableMutexLock lock(&mu_);
  UpdateCapabilityKey(response->capability_key());
  admin_clients_.assign(response->admin_clients().begin(), response->admin_clients().end());
  const std::set<int64_t> assigned(response->assigned_task_ids().begin(),
                                   response->assigned_task_ids().end());
  more_tasks_ = response->more();
  for (TaskDef& def : *response->mutable_tasks()) {
    auto it = runners_.find(def.task_id());
    if (it != runners_.end() && it->second->def().generation() == def.generation()) continue;
    absl::StatusOr<std::shared_ptr<const Pipeline>> built = PipelineFor(def);
    if (!built.ok()) {
      // This task cannot run here; its reader is told why (GetElements), the others run.
      auto [entry, fresh] = unbuildable_tasks_.try_emplace(def.task_id());
      if (fresh || entry->second.generation != def.generation()) {
        LOG(WARNING) << "worker " << options_.worker_id << ": task " << def.task_id()
                     << " generation " << def.generation() << " cannot run here: "
                     << built.status();
      }
      entry->second = UnbuildableTask{def.generation(), built.status()};
      continue;
    }
    unbuildable_tasks_.erase(def.task_id());
    std::shared_ptr<const Pipeline> pipeline = *std::move(built);
    def.clear_pipeline();  // Held once, in pipelines_.
    // Chunks are MACed under the dispatcher's key (security/chunk_mac.h).
    const ChunkMacKey chunk_key =
        capability_key_.has_value() ? ChunkMacKey::Derive(*capability_key_) : ChunkMacKey();
    if (it != runners_.end()) {
      AddCheckpointCounters(it->second->Status(), &retired_totals_);
      retired.push_back(std::move(it->second));
    }
    LOG(INFO) << "worker " << options_.worker_id << ": running task " << def.task_id() << " (job "
              << def.job_id() << " epoch " << def.epoch() << ") generation " << def.generation();
    TaskRunnerOptions runner_options = options_.runner;
    runner_options.checkpoints = checkpoints_.get();
    if (element_server_->pool() != nullptr) runner_options.pool = element_server_->pool();
    // A cache-writing task's runs write the elements at its cache point into chunk files; a
    // cache-reading task's check the chunks they read.
    RunHooksFactory hooks;
    if (!def.cache_dir().empty()) {
      CachePutOptions cache;
      cache.env = options_.runner.env;
      cache.dir = def.cache_dir();
      cache.task_id = def.task_id();
      cache.generation = def.generation();
      cache.mac_key = chunk_key;
      hooks = [cache] { return std::make_unique<CacheRunHooks>(cache); };
    } else if (pipeline->source().reads_cache_chunks) {
      const CacheChunkRecovery recovery(dispatcher_.get(), def.task_id(), def.generation(),
                                        chunk_key, options_.registries);
      hooks = [recovery] { return std::make_unique<CacheReadHooks>(recovery); };
    }
    runners_[def.task_id()] = std::make_shared<TaskRunner>(
        def, pipeline, dispatcher_.get(), runner_options,
        [this, def](int64_t n, const std::vector<CacheChunk>& chunks) {
          ReportFinished(def, n, chunks);
        },
        std::move(hooks), TrainerTailOfferFor(def));
  }
  std::vector<int64_t> done;  // Ended and read to the end: their checkpoints go.
  for (auto it = runners_.begin(); it != runners_.end();) {
    // Drop a task moved elsewhere (or read to its end: the dispatcher lists it no more), and the
    // buffers of one whose client has everything (if listed again, it restarts lazily).
    const bool fully_acknowledged = it->second->FullyAcknowledged();
    if (fully_acknowledged) done.push_back(it->first);
    if (!assigned.count(it->first) || fully_acknowledged) {
      AddCheckpointCounters(it->second->Status(), &retired_totals_);
      retired.push_back(std::move(it->second));
      it = runners_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = unbuildable_tasks_.begin(); it != unbuildable_tasks_.end();) {
    it = assigned.count(it->first) ? std::next(it) : unbuildable_tasks_.erase(it);
  }
  // Pipelines no task has run for idle_pipeline_ms: the dispatcher sends them again if they
  // are needed. (Kept until then for the next epoch's tasks, which would otherwise rebuild them
  // — and restart a Python UDF's helpers — every epoch.)
  std::set<std::string> in_use;
  for (const auto& [id, runner] : runners_) in_use.insert(runner->def().pipeline_key());
  const int64_t now_us = options_.runner.env->NowMicros();
  for (auto it = pipelines_.begin(); it != pipelines_.end();) {
    HeldPipeline& held = it->second;
    if (in_use.count(it->first)) {
      held.idle_since_us = -1;
    } else if (held.idle_since_us < 0) {
      held.idle_since_us = now_us;
    }
    const bool expired = held.idle_since_us >= 0 &&
                         now_us - held.idle_since_us >= options_.idle_pipeline_ms * 1000;
    if (expired) {
      dropped_pipelines.push_back(std::move(held.pipeline));
      if (held.without_tail != nullptr) {
        absl::MutexLock built_lock(&held.without_tail->mu);
        dropped_pipelines.push_back(std::move(held.without_tail->built));
      }
    }
    it = expired ? pipelines_.erase(it) : std::next(it);
  }
  // The store is replaced only by Register, which heartbeats serialize with this.
  CheckpointStore* const checkpoints = checkpoints_.get();
  lock.Release();
  retired.clear();
  dropped_pipelines.clear();
  for (const CacheProfileRequest& profile : response->cache_profiles()) StartCacheProfile(profile);
  // A task moved elsewhere keeps its checkpoints (its new worker may read this directory).
  for (int64_t task_id : done) {
    if (checkpoints == nullptr) break;
    GRANARY_HISTORY_RECORD("checkpoint_delete_all", "invoke", "task=", task_id);
    const absl::Status deleted = checkpoints->DeleteAll(task_id);
    if (!deleted.ok()) LOG(WARNING) << "task " << task_id << " is done: " << deleted;
  }
  return absl::OkStatus();
}

void WorkerImpl::HeartbeatLoop() {
  while (!stopping_.WaitForNotificationWithTimeout(
      absl::Milliseconds(MoreTasks() ? kMinHeartbeatIntervalMs : options_.heartbeat_interval_ms))) {
    const absl::Status status = Heartbeat();
    if (!status.ok()) {
      LOG_EVERY_N(WARNING, 10) << "heartbeat: " << status;
    }
  }
}

bool WorkerImpl::MoreTasks() const {
  absl::MutexLock lock(&mu_);
  return more_tasks_;
}

std::optional<absl::Status> WorkerImpl::UnbuildableTaskError(int64_t task_id) const {
  absl::MutexLock lock(&mu_);
  auto it = unbuildable_tasks_.find(task_id);
  if (it == unbuildable_tasks_.end()) return std::nullopt;
  return absl::Status(it->second.why.code(),
                      absl::StrCat("task ", task_id, " cannot run on worker ",
                                   options_.worker_id, ": ", it->second.why.message()));
}

std::shared_ptr<TaskRunner> WorkerImpl::FindRunner(int64_t task_id) const {
  absl::MutexLock lock(&mu_);
  auto it = runners_.find(task_id);
  return it == runners_.end() ? nullptr : it->second;
}

void WorkerImpl::UpdateCapabilityKey(const std::string& bytes) {
  if (bytes.empty()) return;
  absl::StatusOr<CapabilityKey> key = CapabilityKey::FromBytes(bytes);
  if (!key.ok()) {
    LOG(WARNING) << "the dispatcher sent an unusable capability key: " << key.status();
    return;
  }
  capability_key_ = *std::move(key);
}

absl::Status WorkerImpl::CheckCapability(const TaskDef& def, const std::string& capability) {
  if (!options_.require_capabilities) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (!capability_key_.has_value()) {
    return absl::UnavailableError("the worker has no capability key from the dispatcher yet");
  }
  if (!capability_key_->Verify({def.job_id(), def.task_id(), def.consumer(), def.generation()},
                               capability)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "GetElements for task ", def.task_id(), " generation ", def.generation(),
        ": no valid capability (the dispatcher gives one to the task's reader; SECURITY.md)"));
  }
  return absl::OkStatus();
}

absl::Status WorkerImpl::GetElements(const GetElementsRequest& request, ElementsReply* reply) {
  if (options_.require_capabilities && request.capability().empty()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "GetElements for task ", request.task_id(),
        " needs the task's capability (the dispatcher gives it to the task's reader)"));
  }
  std::shared_ptr<TaskRunner> runner = FindRunner(request.task_id());
  if (runner == nullptr) {
    // A client may learn of a new task (a new epoch, a takeover) before this worker's next
    // heartbeat: ask the dispatcher now rather than make the client wait for it.
    const absl::Status status = Heartbeat();
    if (!status.ok()) LOG(WARNING) << "heartbeat on demand: " << status;
    runner = FindRunner(request.task_id());
  }
  if (runner == nullptr) {
    if (std::optional<absl::Status> why = UnbuildableTaskError(request.task_id())) return *why;
    return absl::NotFoundError(
        absl::StrCat("task ", request.task_id(), " does not run on worker ", options_.worker_id));
  }
  if (runner->def().generation() != request.generation()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", request.task_id(), " runs on worker ", options_.worker_id, " at generation ",
        runner->def().generation(), ", not ", request.generation()));
  }
  RETURN_IF_ERROR(CheckElementsRequest(request));
  RETURN_IF_ERROR(CheckCapability(runner->def(), request.capability()));
  RETURN_IF_ERROR(runner->GetElements(request, reply));
  if (reply->elements.empty()) return absl::OkStatus();
  runner->NoteTransport(element_server_->Prepare(request, reply));
  runner->NoteSent(reply->elements);
  return HitFailpoint(kWorkerAfterProduceBeforeSend);
}

void WorkerImpl::CollectMetrics(MetricSamples& out) const {
  GetWorkerStatusResponse status;
  if (!GetStatus(&status).ok()) return;
  int64_t running = 0;
  for (const TaskStatus& t : status.tasks()) {
    if (!t.finished()) ++running;
    const MetricLabels labels = {{"task", absl::StrCat(t.task_id())}};
    out.AddGauge("granary_worker_window_fill_ratio",
                 "Payload bytes a task's window holds over its limit.", labels,
                 t.window_bytes() > 0 ? static_cast<double>(t.buffered_bytes()) /
                                            static_cast<double>(t.window_bytes())
                                      : 0);
    out.AddGauge("granary_worker_window_elements",
                 "Elements a task's window holds (produced, not yet acknowledged).", labels,
                 static_cast<double>(t.produced() - t.window_start()));
  }
  out.AddGauge("granary_worker_tasks", "Tasks this worker holds, by whether they ended.",
               {{"state", "running"}}, static_cast<double>(running));
  out.AddGauge("granary_worker_tasks", "Tasks this worker holds, by whether they ended.",
               {{"state", "ended"}}, static_cast<double>(status.tasks_size() - running));
  out.AddGauge("granary_worker_buffer_pool_bytes",
               "Element buffer pool: bytes handed out, and kept for reuse.", {{"kind", "live"}},
               static_cast<double>(status.pool_live_bytes()));
  out.AddGauge("granary_worker_buffer_pool_bytes",
               "Element buffer pool: bytes handed out, and kept for reuse.", {{"kind", "cached"}},
               static_cast<double>(status.pool_cached_bytes()));
  out.AddGauge("granary_worker_shm_sessions", "Shared-memory sessions of clients on this host.", {},
               static_cast<double>(status.shm_sessions()));
  out.AddGauge("granary_worker_incarnation", "This process' incarnation of its worker id.", {},
               static_cast<double>(status.incarnation()));
}

absl::Status WorkerImpl::GetStatus(GetWorkerStatusResponse* response,
                                   const std::optional<std::string>& viewer) const {
  absl::MutexLock lock(&mu_);
  const bool sees_all =
      !viewer.has_value() ||
      std::find(admin_clients_.begin(), admin_clients_.end(), *viewer) != admin_clients_.end();
  *response = retired_totals_;
  response->set_worker_id(options_.worker_id);
  response->set_incarnation(incarnation_);
  BufferPool* const images = element_server_->pool();
  const BufferPool::Stats pool = (images != nullptr ? images : options_.runner.pool)->stats();
  response->set_pool_maps(pool.maps);
  response->set_pool_reuses(pool.reuses);
  response->set_pool_cached_bytes(static_cast<int64_t>(pool.cached_bytes));
  response->set_pool_live_bytes(static_cast<int64_t>(pool.live_bytes));
  element_server_->AddStatus(response);
  for (const auto& [id, runner] : runners_) {
    const TaskStatus status = runner->Status();
    AddCheckpointCounters(status, response);
    const auto& readers = runner->def().readers();
    if (sees_all || readers.empty() ||
        std::find(readers.begin(), readers.end(), *viewer) != readers.end()) {
      *response->add_tasks() = status;
    }
  }
  return absl::OkStatus();
}

}  // namespace granary
