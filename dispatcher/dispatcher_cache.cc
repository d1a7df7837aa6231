// DispatcherImpl's cache decisions (dispatcher_impl.h, "Caching jobs"): how an epoch uses its
// job's cache, cache_policy auto's profile round trip and decision, eviction and the tidying of
// a completed cache. The planning itself is cache/cache_planner.h's.
#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cache/cache_gc.h"
#include "cache/cache_policy.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "dispatcher/dispatcher_impl.h"
#include "glog/logging.h"

namespace granary {
std::string DispatcherImpl::CacheKeyOf(const PipelineDef& def, int cache_point,
                                       uint64_t seed) const {
  return CacheKey(
      def, cache_point, seed,
      options_.data_roots.has_value() ? absl::StrJoin(options_.data_roots->roots(), ",") : "");
}

std::string DispatcherImpl::CacheRootOwnerFile() const {
  return absl::StrCat(options_.cache_root, "/", kCacheRootOwnerFileName);
}

absl::Status DispatcherImpl::CheckCacheRootUnowned() {
  const std::string owner_file = CacheRootOwnerFile();
  if (!options_.env->FileExists(owner_file)) return absl::OkStatus();
  const absl::StatusOr<std::string> owner = ReadFileToString(options_.env, owner_file);
  if (!owner.ok()) {
    LOG(WARNING) << "cannot tell whose caches the cache root holds: " << owner.status();
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "journal ", options_.journal_dir, " is new (empty), but the cache root ", options_.cache_root,
      " holds the caches of cluster ", absl::StripAsciiWhitespace(*owner), " (", owner_file,
      "): that cluster's journal seems lost. Restore its journal directory "
      "from a backup, or start a new, empty cluster deliberately with --new_cluster (the old "
      "cluster's caches are then deleted as garbage)"));
}

void DispatcherImpl::ClaimCacheRoot() {
  std::string cluster_id;
  {
    absl::MutexLock lock(&mu_);
    cluster_id = state_.cluster_id();
  }
  const std::string owner_file = CacheRootOwnerFile();
  const absl::StatusOr<std::string> owner = ReadFileToString(options_.env, owner_file);
  if (owner.ok() && absl::StripAsciiWhitespace(*owner) == cluster_id) return;
  if (owner.ok()) {
    LOG(WARNING) << "cache root " << options_.cache_root << " was cluster "
                 << absl::StripAsciiWhitespace(*owner) << "'s; now cluster " << cluster_id << "'s";
  }
  absl::Status claimed = options_.env->CreateDirs(options_.cache_root);
  if (claimed.ok()) {
    claimed = WriteStringToFile(options_.env, owner_file, cluster_id + "\n", /*sync=*/true);
  }
  if (claimed.ok()) claimed = options_.env->SyncDir(options_.cache_root);
  if (!claimed.ok()) LOG(WARNING) << "cache root owner file: " << claimed;
}

std::string DispatcherImpl::CacheDir(const std::string& cache_key) const {
  return absl::StrCat(options_.cache_root, "/", cache_key);
}

absl::StatusOr<EpochCache> DispatcherImpl::DecideEpochCache(const JobState& job,
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
  const CacheState* known = state_.FindCache(cache.cache_key());
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

void DispatcherImpl::AskForProfile(int64_t job_id) {
  profile_waits_.try_emplace(job_id, ProfileWait{options_.env->NowMicros(), ""});
}

absl::Status DispatcherImpl::AwaitCacheDecision(int64_t job_id) {
  AskForProfile(job_id);
  auto decided = [this, job_id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const JobState* job = state_.FindJob(job_id);
    return job == nullptr || job->has_cache_decision() || !journal_failure_.ok();
  };
  mu_.AwaitWithTimeout(absl::Condition(&decided), absl::Milliseconds(options_.cache_wait_ms));
  RETURN_IF_ERROR(CheckUsable());
  const JobState* job = state_.FindJob(job_id);
  if (job != nullptr && !job->has_cache_decision()) {
    return absl::UnavailableError(absl::StrCat(
        "job ", job_id, " (cache_policy auto): a worker is measuring its pipeline; retry"));
  }
  return absl::OkStatus();
}

bool DispatcherImpl::AwaitOwnPut(int64_t job_id, const EpochCache& cache) {
  if (cache.mode() != EpochCache::COMPUTE || cache.cache_key().empty()) return false;
  const CacheState* writing = state_.FindCache(cache.cache_key());
  if (writing == nullptr || writing->complete() || writing->put_job_id() != job_id) return false;
  const std::string key = cache.cache_key();
  auto written = [this, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const CacheState* c = state_.FindCache(key);
    return c == nullptr || c->complete() || !journal_failure_.ok();
  };
  mu_.AwaitWithTimeout(absl::Condition(&written), absl::Milliseconds(options_.cache_wait_ms));
  return true;
}

void DispatcherImpl::AddCacheProfileRequests(const WorkerState& worker,
                                             WorkerHeartbeatResponse* response) {
  if (worker.standby() || response->more()) return;
  for (auto& [job_id, wait] : profile_waits_) {
    const JobState* job = state_.FindJob(job_id);
    if (job == nullptr || job->has_cache_decision()) continue;
    const WorkerState* asked = wait.worker_id.empty() ? nullptr : state_.FindWorker(wait.worker_id);
    if (asked != nullptr && !asked->lost() && wait.worker_id != worker.worker_id()) continue;
    wait.worker_id = worker.worker_id();
    const PipelineDef& def = state_.FindDataset(job->dataset_id())->pipeline();
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

std::vector<CacheUsage> DispatcherImpl::CacheUsages() const {
  // A finished task whose consumer has not read it all is run again if its worker is lost: its
  // epoch's cache is still in use.
  std::set<std::string> unread;
  for (const int64_t id : unread_finished_) {
    const TaskState* task = state_.FindTask(id);
    const EpochState* epoch =
        task == nullptr ? nullptr : state_.FindEpoch(task->job_id(), task->epoch());
    if (epoch != nullptr && epoch->cache().mode() != EpochCache::COMPUTE) {
      unread.insert(epoch->cache().cache_key());
    }
  }
  std::vector<CacheUsage> usages;
  for (const auto& [key, cache] : state_.caches()) {
    usages.push_back({key, cache.bytes(), cache.last_used_seq(),
                      state_.CacheInUse(key) || unread.count(key) > 0});
  }
  return usages;
}

absl::Status DispatcherImpl::ReportCacheProfile(const ReportCacheProfileRequest& request,
                                                ReportCacheProfileResponse* response) {
  Update decide;
  decide.mutable_decide_cache()->set_job_id(request.job_id());
  CacheDecision* decision = decide.mutable_decide_cache()->mutable_decision();
  std::vector<std::string> evictions;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckUsable());
    const JobState* job = state_.FindJob(request.job_id());
    if (job == nullptr || job->options().cache_policy() != CACHE_AUTO) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", request.job_id(), " has no cache_policy auto"));
    }
    if (job->has_cache_decision()) {
      *response->mutable_decision() = job->cache_decision();
      return absl::OkStatus();
    }
    const PipelineDef& def = state_.FindDataset(job->dataset_id())->pipeline();
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
        const CacheState* cache = state_.FindCache(CacheKeyOf(def, point, job->options().seed()));
        if (cache != nullptr && cache->complete() && !cache->invalid()) {
          input.existing_points.insert(point);
        }
      }
      const std::vector<CacheUsage> usages = CacheUsages();
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
  }
  RETURN_IF_ERROR(Evict(evictions, absl::StrCat("room for job ", request.job_id(), "'s cache")));
  return JournalAndApply(
      decide, [&](const absl::Status& applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        const JobState* job = state_.FindJob(request.job_id());
        if (job == nullptr || !job->has_cache_decision()) return applied;
        if (applied.ok()) {
          LOG(INFO) << "job " << request.job_id() << " (cache_policy auto, profiled by worker "
                    << request.worker_id() << "): " << job->cache_decision().reason();
        }
        profile_waits_.erase(request.job_id());
        *response->mutable_decision() = job->cache_decision();
        return absl::OkStatus();
      });
}

absl::Status DispatcherImpl::DecideOverdueCaches() {
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
    RETURN_IF_ERROR(JournalAndApply(
        update, [&](const absl::Status& applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          profile_waits_.erase(job_id);
          if (applied.ok())
            LOG(WARNING) << "job " << job_id << ": " << update.decide_cache().decision().reason();
          return absl::OkStatus();  // Already decided, or gone: nothing to wait for either way.
        }));
  }
  return absl::OkStatus();
}

absl::Status DispatcherImpl::Evict(const std::vector<std::string>& cache_keys,
                                   const std::string& reason) {
  for (const std::string& key : cache_keys) {
    Update update;
    update.mutable_evict_cache()->set_cache_key(key);
    update.mutable_evict_cache()->set_reason(reason);
    std::string tombstone;  // Where the evicted cache's files now are; empty: kept, or none.
    RETURN_IF_ERROR(JournalAndApply(
        update, [&](const absl::Status& applied) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          if (!applied.ok()) {
            LOG(INFO) << "cache " << key << " kept: " << applied;
            return absl::OkStatus();
          }
          LOG(INFO) << "evicted cache " << key << " (" << reason << ")";
          ++counters_.cache_evictions;
          // Renamed under mu_, before a new Put of the key can create its directory again; the
          // files go outside it.
          const std::string renamed = absl::StrCat(options_.cache_root, "/", kEvictedDirPrefix, key,
                                                   "-", state_.applied_seq());
          if (options_.env->FileExists(CacheDir(key)) &&
              options_.env->RenameFile(CacheDir(key), renamed).ok()) {
            tombstone = renamed;
          }
          return absl::OkStatus();
        }));
    if (tombstone.empty()) continue;
    const absl::StatusOr<CacheGcCounts> deleted = DeleteCacheDir(options_.env, tombstone);
    if (!deleted.ok()) LOG(WARNING) << "evicted cache " << key << ": " << deleted.status();
  }
  return absl::OkStatus();
}

absl::Status DispatcherImpl::AfterCacheComplete(const std::string& cache_key) {
  std::vector<std::string> evictions;
  {
    absl::MutexLock lock(&mu_);
    // Under mu_: while the cache is known and complete no Put writes its directory (an
    // eviction renames it away under mu_ first). The strays are few: a lost run's chunks.
    const CacheState* cache = state_.FindCache(cache_key);
    if (cache != nullptr && cache->complete()) {
      ASSIGN_OR_RETURN(const CacheGcCounts stray,
                       DeleteStrayChunks(options_.env, CacheDir(cache_key), *cache));
      if (stray.files > 0) {
        LOG(INFO) << "cache " << cache_key << " complete: deleted " << stray.files
                  << " stray chunk files";
      }
    }
    if (options_.cache_capacity_bytes > 0) {
      evictions = EvictionsToFit(CacheUsages(), 0, options_.cache_capacity_bytes)
                      .value_or(std::vector<std::string>{});
    }
  }
  return Evict(evictions,
               absl::StrCat("over --cache_capacity_bytes ", options_.cache_capacity_bytes,
                            " once cache ", cache_key, " completed"));
}

}  // namespace granary
