#include "cache/cache_coordinator.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "cache/cache_gc.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "cache/cache_policy.h"

namespace granary {

CacheCoordinator::CacheCoordinator(DispatcherCore* core, CacheCoordinatorOptions options,
                                   UnreadTasks unread)
    : core_(core), options_(std::move(options)), unread_(std::move(unread)) {}

absl::Status CacheCoordinator::CheckNoCacheOps(const PipelineDef& def) {
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
  return absl::OkStatus();
}

std::string CacheCoordinator::CacheKeyOf(const PipelineDef& def, int cache_point,
                                         uint64_t seed) const {
  return CacheKey(def, cache_point, seed, options_.data_roots_key);
}

std::string CacheCoordinator::CacheDir(const std::string& cache_key) const {
  return absl::StrCat(options_.cache_root, "/", cache_key);
}

std::string CacheCoordinator::RootOwnerFile() const {
  return absl::StrCat(options_.cache_root, "/", kCacheRootOwnerFileName);
}

absl::Status CacheCoordinator::CheckRootUnowned(const std::string& journal_name) const {
  const std::string owner_file = RootOwnerFile();
  if (!options_.env->FileExists(owner_file)) return absl::OkStatus();
  const absl::StatusOr<std::string> owner = ReadFileToString(options_.env, owner_file);
  if (!owner.ok()) {
    LOG(WARNING) << "cannot tell whose caches the cache root holds: " << owner.status();
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      journal_name, " is new (empty), but the cache root ", options_.cache_root,
      " holds the caches of cluster ", absl::StripAsciiWhitespace(*owner), " (", owner_file,
      "): that cluster's journal seems lost. Restore its journal directory "
      "from a backup, or start a new, empty cluster deliberately with --new_cluster (the old "
      "cluster's caches are then deleted as garbage)"));
}

void CacheCoordinator::ClaimRootAndCollectGarbage() const {
  const std::string cluster_id =
      core_->Read([](const DispatcherState& state) { return state.cluster_id(); });
  const std::string owner_file = RootOwnerFile();
  const absl::StatusOr<std::string> owner = ReadFileToString(options_.env, owner_file);
  if (!owner.ok() || absl::StripAsciiWhitespace(*owner) != cluster_id) {
    if (owner.ok()) {
      LOG(WARNING) << "cache root " << options_.cache_root << " was cluster "
                   << absl::StripAsciiWhitespace(*owner) << "'s; now cluster " << cluster_id
                   << "'s";
    }
    absl::Status claimed = options_.env->CreateDirs(options_.cache_root);
    if (claimed.ok()) {
      claimed = WriteStringToFile(options_.env, owner_file, cluster_id + "\n", /*sync=*/true);
    }
    if (claimed.ok()) claimed = options_.env->SyncDir(options_.cache_root);
    if (!claimed.ok()) LOG(WARNING) << "cache root owner file: " << claimed;
  }
  // Before any worker probes or writes: what no cache of the recovered state holds.
  const absl::StatusOr<CacheGcCounts> collected = core_->Read([&](const DispatcherState& state) {
    return CollectCacheGarbage(options_.env, options_.cache_root, state.caches());
  });
  if (!collected.ok()) {
    LOG(WARNING) << "cache root " << options_.cache_root << ": " << collected.status();
  } else if (collected->files + collected->dirs > 0) {
    LOG(INFO) << "cache root " << options_.cache_root << ": deleted " << collected->files
              << " stray files and " << collected->dirs << " directories";
  }
}

absl::StatusOr<EpochCache> CacheCoordinator::DecideEpochCache(const DispatcherState& state,
                                                              const JobState& job,
                                                              const PipelineDef& def) const {
  EpochCache cache;
  const CachePolicy policy = job.options().cache_policy();
  ASSIGN_OR_RETURN(const std::optional<int> pinned, PinnedPrefixOps(def, policy));
  std::optional<int> point;
  if (policy == CACHE_AUTO) {
    if (job.cache_decision().cache_point() > 0) point = job.cache_decision().cache_point();
  } else {
    point = pinned;
  }
  cache.set_cached_prefix_ops(pinned.value_or(0));
  if (!point.has_value()) return cache;
  cache.set_cache_key(CacheKeyOf(def, *point, job.options().seed()));
  cache.set_cache_point(*point);
  const std::string dir = CacheDir(cache.cache_key());
  const CacheState* known = state.FindCache(cache.cache_key());
  if (known == nullptr) {
    cache.set_mode(EpochCache::PUT);
    *cache.mutable_pipeline() = WithCacheWrite(def, *point);
    cache.set_cache_dir(dir);
  } else if (known->complete() && !known->invalid()) {
    cache.set_mode(EpochCache::GET);
    *cache.mutable_pipeline() = ReadingFromCache(def, *point, dir);
  }  // Else another epoch is writing it, or a chunk of it failed its check: compute (with the
     // prefix pinned all the same).
  return cache;
}

bool CacheCoordinator::OwnPutRunning(const DispatcherState& state, int64_t job_id,
                                     const EpochCache& cache) {
  if (cache.mode() != EpochCache::COMPUTE || cache.cache_key().empty()) return false;
  const CacheState* writing = state.FindCache(cache.cache_key());
  return writing != nullptr && !writing->complete() && writing->put_job_id() == job_id;
}

void CacheCoordinator::AwaitCacheWritten(const std::string& cache_key) const {
  core_->Await(
      [&cache_key](const DispatcherState& state) {
        const CacheState* cache = state.FindCache(cache_key);
        return cache == nullptr || cache->complete();
      },
      absl::Milliseconds(options_.cache_wait_ms));
}

absl::Status CacheCoordinator::CheckTaskChunks(const TaskFinishedRequest& request, bool put,
                                               bool whole_output, const std::string& cache_dir) {
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

absl::Status CacheCoordinator::RecomputeChunk(const RecomputeCacheChunkRequest& request,
                                              RecomputeCacheChunkResponse* response) {
  Update update;
  RETURN_IF_ERROR(core_->CheckUsable());
  ASSIGN_OR_RETURN(
      const bool invalidate, core_->Read([&](const DispatcherState& state) -> absl::StatusOr<bool> {
        const TaskState* task = state.FindTask(request.task_id());
        if (task == nullptr)
          return absl::NotFoundError(absl::StrCat("no task ", request.task_id()));
        if (request.generation() != task->generation()) {
          return absl::FailedPreconditionError(
              absl::StrCat("task ", request.task_id(), " is at generation ", task->generation(),
                           ", not ", request.generation()));
        }
        const EpochState* epoch = state.FindEpoch(task->job_id(), task->epoch());
        const CacheState* cache = state.FindCache(epoch->cache().cache_key());
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
        const JobState* job = state.FindJob(task->job_id());
        *response->mutable_prefix() = CachedPrefix(state.FindDataset(job->dataset_id())->pipeline(),
                                                   epoch->cache().cache_point());
        response->set_seed(job->options().seed());
        response->set_cached_prefix_ops(epoch->cache().cache_point());
        *response->mutable_leased() = plan->leased();
        *response->mutable_chunk() = *chunk;
        LOG(WARNING) << "task " << request.task_id() << " (worker " << task->worker_id()
                     << ") recomputes cache chunk " << request.chunk_path() << ": "
                     << request.problem();
        if (cache->invalid()) return false;
        update.mutable_invalidate_cache()->set_cache_key(cache->cache_key());
        update.mutable_invalidate_cache()->set_reason(
            absl::StrCat("chunk ", request.chunk_path(), ": ", request.problem().substr(0, 1024)));
        return true;
      }));
  if (!invalidate) return absl::OkStatus();
  // Invalidated meanwhile by another worker's report: as wanted.
  return OkIfAlreadyDone(core_->Propose(update));
}

void CacheCoordinator::AskForProfile(int64_t job_id) {
  absl::MutexLock lock(&mu_);
  profile_waits_.try_emplace(job_id, ProfileWait{options_.env->NowMicros(), ""});
}

absl::Status CacheCoordinator::AwaitDecision(int64_t job_id) {
  AskForProfile(job_id);
  const bool decided = core_->Await(
      [job_id](const DispatcherState& state) {
        const JobState* job = state.FindJob(job_id);
        return job == nullptr || job->has_cache_decision();
      },
      absl::Milliseconds(options_.cache_wait_ms));
  RETURN_IF_ERROR(core_->CheckUsable());
  if (!decided) {
    return absl::UnavailableError(absl::StrCat(
        "job ", job_id, " (cache_policy auto): a worker is measuring its pipeline; retry"));
  }
  return absl::OkStatus();
}

void CacheCoordinator::AddProfileRequests(const DispatcherState& state, const WorkerState& worker,
                                          WorkerHeartbeatResponse* response) {
  if (worker.standby() || response->more()) return;
  absl::MutexLock lock(&mu_);
  for (auto& [job_id, wait] : profile_waits_) {
    const JobState* job = state.FindJob(job_id);
    if (job == nullptr || job->has_cache_decision()) continue;
    const WorkerState* asked = wait.worker_id.empty() ? nullptr : state.FindWorker(wait.worker_id);
    if (asked != nullptr && !asked->lost() && wait.worker_id != worker.worker_id()) continue;
    wait.worker_id = worker.worker_id();
    const PipelineDef& def = state.FindDataset(job->dataset_id())->pipeline();
    CacheProfileRequest* request = response->add_cache_profiles();
    request->set_job_id(job_id);
    *request->mutable_pipeline() = def;
    request->set_seed(job->options().seed());
    for (const int point : MarkPoints(def)) request->add_cache_points(point);
    // The worker id hashed: it may hold any character a path should not.
    request->set_probe_dir(absl::StrCat(options_.cache_root, "/probe-", job_id, "-",
                                        HashToHex(Hash64(worker.worker_id()))));
    request->set_sample_records(options_.cache_profile_records);
    return;  // One a heartbeat: a pipeline is large, and a worker profiles one at a time.
  }
}

std::vector<CacheUsage> CacheCoordinator::CacheUsages(const DispatcherState& state) const {
  // A finished task whose consumer has not read it all is run again if its worker is lost: its
  // epoch's cache is still in use.
  std::set<std::string> unread;
  for (const int64_t id : unread_()) {
    const TaskState* task = state.FindTask(id);
    const EpochState* epoch =
        task == nullptr ? nullptr : state.FindEpoch(task->job_id(), task->epoch());
    if (epoch != nullptr && epoch->cache().mode() != EpochCache::COMPUTE) {
      unread.insert(epoch->cache().cache_key());
    }
  }
  std::vector<CacheUsage> usages;
  for (const auto& [key, cache] : state.caches()) {
    usages.push_back({key, cache.bytes(), cache.last_used_seq(),
                      state.CacheInUse(key) || unread.count(key) > 0});
  }
  return usages;
}

absl::Status CacheCoordinator::ReportCacheProfile(const ReportCacheProfileRequest& request,
                                                  ReportCacheProfileResponse* response) {
  Update decide;
  decide.mutable_decide_cache()->set_job_id(request.job_id());
  CacheDecision* decision = decide.mutable_decide_cache()->mutable_decision();
  std::vector<std::string> evictions;
  RETURN_IF_ERROR(core_->CheckUsable());
  // Whether a decision is to be journaled (none was made yet).
  ASSIGN_OR_RETURN(const bool decide_now, core_->Read([&](const DispatcherState& state)
                                                          -> absl::StatusOr<bool> {
    const JobState* job = state.FindJob(request.job_id());
    if (job == nullptr || job->options().cache_policy() != CACHE_AUTO) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", request.job_id(), " has no cache_policy auto"));
    }
    if (job->has_cache_decision()) {
      *response->mutable_decision() = job->cache_decision();
      return false;
    }
    const PipelineDef& def = state.FindDataset(job->dataset_id())->pipeline();
    const std::vector<int> candidates = MarkPoints(def);
    const absl::Status checked = CheckCacheProfile(request.profile(), candidates);
    if (!request.error().empty() || !checked.ok()) {
      decision->set_reason(
          absl::StrCat("compute: worker ", request.worker_id(), " could not profile the pipeline: ",
                       request.error().empty() ? checked.message() : request.error()));
      *decision->mutable_profile() = request.profile();
    } else {
      CachePlanInput input;
      input.profile = request.profile();
      if (job->options().num_epochs() > 0) {
        input.epochs = std::max<int64_t>(job->options().num_epochs() - job->epochs_started(), 1);
      }
      for (const int point : candidates) {
        const CacheState* cache = state.FindCache(CacheKeyOf(def, point, job->options().seed()));
        if (cache != nullptr && cache->complete() && !cache->invalid()) {
          input.existing_points.insert(point);
        }
      }
      const std::vector<CacheUsage> usages = CacheUsages(state);
      if (options_.cache_capacity_bytes > 0) {
        int64_t pinned = 0;
        for (const CacheUsage& usage : usages) pinned += usage.in_use ? usage.bytes : 0;
        input.room_bytes = std::max<int64_t>(options_.cache_capacity_bytes - pinned, 0);
      }
      *decision = PlanCache(input);
      const int point = decision->cache_point();
      if (point > 0 && !input.existing_points.count(point) && options_.cache_capacity_bytes > 0) {
        std::optional<std::vector<std::string>> fit = EvictionsToFit(
            usages, EstimatedCacheBytes(input.profile, point), options_.cache_capacity_bytes);
        if (fit.has_value()) evictions = *std::move(fit);
      }
    }
    return true;
  }));
  if (!decide_now) return absl::OkStatus();
  RETURN_IF_ERROR(Evict(evictions, absl::StrCat("room for job ", request.job_id(), "'s cache")));
  // The job's decision — this one, or one journaled meanwhile — is the answer.
  const auto answer = [&](const DispatcherState& state) {
    const JobState* job = state.FindJob(request.job_id());
    if (job == nullptr || !job->has_cache_decision()) return false;
    absl::MutexLock lock(&mu_);
    profile_waits_.erase(request.job_id());
    *response->mutable_decision() = job->cache_decision();
    return true;
  };
  const absl::Status proposed = core_->Propose(decide, [&](const DispatcherState& state) {
    LOG(INFO) << "job " << request.job_id() << " (cache_policy auto, profiled by worker "
              << request.worker_id()
              << "): " << state.FindJob(request.job_id())->cache_decision().reason();
    answer(state);
  });
  if (proposed.ok() || absl::IsUnavailable(proposed)) return proposed;
  // Refused: decided meanwhile (that decision is the answer), or the job is gone.
  return core_->Read(answer) ? absl::OkStatus() : proposed;
}

absl::Status CacheCoordinator::DecideOverdue() {
  std::vector<int64_t> overdue;
  {
    absl::MutexLock lock(&mu_);
    const uint64_t now = options_.env->NowMicros();
    for (const auto& [job_id, wait] : profile_waits_) {
      if (now - wait.since_us >= static_cast<uint64_t>(options_.cache_profile_timeout_ms) * 1000) {
        overdue.push_back(job_id);
      }
    }
  }
  for (const int64_t job_id : overdue) {
    Update update;
    update.mutable_decide_cache()->set_job_id(job_id);
    update.mutable_decide_cache()->mutable_decision()->set_reason(absl::StrCat(
        "compute: no worker reported a profile within ", options_.cache_profile_timeout_ms, " ms"));
    const absl::Status proposed = core_->Propose(update, [&](const DispatcherState&) {
      LOG(WARNING) << "job " << job_id << ": " << update.decide_cache().decision().reason();
    });
    if (absl::IsUnavailable(proposed)) return proposed;
    // Decided, already decided, or gone: nothing to wait for either way.
    absl::MutexLock lock(&mu_);
    profile_waits_.erase(job_id);
  }
  return absl::OkStatus();
}

absl::Status CacheCoordinator::Evict(const std::vector<std::string>& cache_keys,
                                     const std::string& reason) {
  for (const std::string& key : cache_keys) {
    Update update;
    update.mutable_evict_cache()->set_cache_key(key);
    update.mutable_evict_cache()->set_reason(reason);
    std::string tombstone;  // Where the evicted cache's files now are; empty: kept, or none.
    const absl::Status proposed = core_->Propose(update, [&](const DispatcherState& state) {
      LOG(INFO) << "evicted cache " << key << " (" << reason << ")";
      // Renamed under the core's lock, before a new Put of the key can create its directory
      // again; the files go outside it.
      const std::string renamed =
          absl::StrCat(options_.cache_root, "/", kEvictedDirPrefix, key, "-", state.applied_seq());
      if (options_.env->FileExists(CacheDir(key)) &&
          options_.env->RenameFile(CacheDir(key), renamed).ok()) {
        tombstone = renamed;
      }
      absl::MutexLock lock(&mu_);
      ++evictions_;
    });
    if (absl::IsUnavailable(proposed)) return proposed;
    if (!proposed.ok()) LOG(INFO) << "cache " << key << " kept: " << proposed;
    if (tombstone.empty()) continue;
    const absl::StatusOr<CacheGcCounts> deleted = DeleteCacheDir(options_.env, tombstone);
    if (!deleted.ok()) LOG(WARNING) << "evicted cache " << key << ": " << deleted.status();
  }
  return absl::OkStatus();
}

absl::Status CacheCoordinator::AfterCacheComplete(const std::string& cache_key) {
  std::vector<std::string> evictions;
  RETURN_IF_ERROR(core_->Read([&](const DispatcherState& state) -> absl::Status {
    // Under the core's lock: while the cache is known and complete no Put writes its directory
    // (an eviction renames it away under that lock first). The strays are few: a lost run's
    // chunks.
    const CacheState* cache = state.FindCache(cache_key);
    if (cache != nullptr && cache->complete()) {
      ASSIGN_OR_RETURN(const CacheGcCounts stray,
                       DeleteStrayChunks(options_.env, CacheDir(cache_key), *cache));
      if (stray.files > 0) {
        LOG(INFO) << "cache " << cache_key << " complete: deleted " << stray.files
                  << " stray chunk files";
      }
    }
    if (options_.cache_capacity_bytes > 0) {
      evictions = EvictionsToFit(CacheUsages(state), 0, options_.cache_capacity_bytes)
                      .value_or(std::vector<std::string>{});
    }
    return absl::OkStatus();
  }));
  return Evict(evictions,
               absl::StrCat("over --cache_capacity_bytes ", options_.cache_capacity_bytes,
                            " once cache ", cache_key, " completed"));
}

void CacheCoordinator::CollectMetrics(const DispatcherState& state, MetricSamples& out) const {
  int64_t complete = 0, writing = 0, invalid = 0, cache_bytes = 0;
  for (const auto& [key, cache] : state.caches()) {
    if (cache.invalid()) {
      ++invalid;
    } else if (cache.complete()) {
      ++complete;
      cache_bytes += cache.bytes();
    } else {
      ++writing;
    }
  }
  constexpr char kCaches[] = "Caches by state.";
  out.AddGauge("granary_cache_caches", kCaches, {{"state", "complete"}}, complete);
  out.AddGauge("granary_cache_caches", kCaches, {{"state", "writing"}}, writing);
  out.AddGauge("granary_cache_caches", kCaches, {{"state", "invalid"}}, invalid);
  out.AddGauge("granary_cache_bytes", "Bytes of the complete, valid caches' chunk files.", {},
               cache_bytes);
  out.AddGauge("granary_cache_capacity_bytes", "--cache_capacity_bytes (0: no limit).", {},
               options_.cache_capacity_bytes);
  absl::MutexLock lock(&mu_);
  out.AddCounter("granary_cache_evictions_total", "Caches evicted by this process.", {},
                 evictions_);
}

}  // namespace granary
