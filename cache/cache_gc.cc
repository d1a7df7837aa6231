#include "cache/cache_gc.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {
namespace {

bool IsChunkFileName(const std::string& name) {
  return absl::EndsWith(name, ".chunk") || absl::EndsWith(name, ".tmp");
}

bool IsCacheKeyName(const std::string& name) {
  if (name.size() != 16) return false;
  for (const char c : name) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

bool IsProbeName(const std::string& name) { return absl::StartsWith(name, "probe-"); }

// Deletes the chunk files in `dir` whose names `keep` does not list.
absl::StatusOr<CacheGcCounts> DeleteChunksExcept(Env* env, const std::string& dir,
                                                 const std::set<std::string>& keep) {
  CacheGcCounts counts;
  ASSIGN_OR_RETURN(const std::vector<std::string> names, env->GetChildren(dir));
  for (const std::string& name : names) {
    if (!IsChunkFileName(name) || keep.count(name)) continue;
    RETURN_IF_ERROR(env->DeleteFile(absl::StrCat(dir, "/", name)));
    ++counts.files;
  }
  return counts;
}

// Deletes `dir` when it is empty.
absl::StatusOr<bool> DeleteDirIfEmpty(Env* env, const std::string& dir) {
  ASSIGN_OR_RETURN(const std::vector<std::string> names, env->GetChildren(dir));
  if (!names.empty()) return false;
  RETURN_IF_ERROR(env->DeleteDir(dir));
  return true;
}

}  // namespace

absl::StatusOr<CacheGcCounts> DeleteCacheDir(Env* env, const std::string& dir) {
  if (!env->FileExists(dir)) return CacheGcCounts{};
  ASSIGN_OR_RETURN(CacheGcCounts counts, DeleteChunksExcept(env, dir, {}));
  ASSIGN_OR_RETURN(const bool deleted, DeleteDirIfEmpty(env, dir));
  counts.dirs += deleted;
  return counts;
}

absl::StatusOr<CacheGcCounts> DeleteStrayChunks(Env* env, const std::string& dir,
                                                const CacheState& cache) {
  if (!env->FileExists(dir)) return CacheGcCounts{};
  // By name: the manifest's paths were made with the cache root as it was spelled then.
  std::set<std::string> manifest;
  for (const CacheChunk& chunk : cache.chunks()) {
    manifest.insert(chunk.path().substr(chunk.path().rfind('/') + 1));
  }
  return DeleteChunksExcept(env, dir, manifest);
}

absl::StatusOr<CacheGcCounts> CollectCacheGarbage(Env* env, const std::string& cache_root,
                                                  const std::map<std::string, CacheState>& caches) {
  CacheGcCounts total;
  if (!env->FileExists(cache_root)) return total;
  ASSIGN_OR_RETURN(const std::vector<std::string> names, env->GetChildren(cache_root));
  for (const std::string& name : names) {
    const std::string dir = absl::StrCat(cache_root, "/", name);
    if (!env->GetChildren(dir).ok()) continue;  // Not a directory: not the cache's.
    auto known = caches.find(name);
    CacheGcCounts counts;
    if (known != caches.end()) {
      if (!known->second.complete()) continue;
      ASSIGN_OR_RETURN(counts, DeleteStrayChunks(env, dir, known->second));
    } else if (IsCacheKeyName(name) || absl::StartsWith(name, kEvictedDirPrefix)) {
      ASSIGN_OR_RETURN(counts, DeleteCacheDir(env, dir));
    } else if (IsProbeName(name)) {
      // A probe holds a directory per point (cache_profiler.h).
      ASSIGN_OR_RETURN(const std::vector<std::string> points, env->GetChildren(dir));
      for (const std::string& point : points) {
        ASSIGN_OR_RETURN(const CacheGcCounts deleted,
                         DeleteCacheDir(env, absl::StrCat(dir, "/", point)));
        counts.files += deleted.files;
        counts.dirs += deleted.dirs;
      }
      ASSIGN_OR_RETURN(const bool deleted, DeleteDirIfEmpty(env, dir));
      counts.dirs += deleted;
    }
    total.files += counts.files;
    total.dirs += counts.dirs;
  }
  return total;
}

}  // namespace granary
