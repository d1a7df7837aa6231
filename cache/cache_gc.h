// Garbage collection of the cache root (--cache_root): what no cache of the dispatcher's state
// holds any more. Only names the cache writes are ever deleted — a directory named like a cache
// key (16 hex digits), a probe (`probe-…`, cache_profiler.h) or an evicted cache's
// (`evicted-…`), and in a cache's directory files named like its chunks (`*.chunk`, `*.tmp`,
// cache/FORMAT.md) — so a cache root that also holds other files loses none of them. A cache
// root belongs to one dispatcher (journal): another's caches are garbage to it.
#ifndef GRANARY_CACHE_CACHE_GC_H_
#define GRANARY_CACHE_CACHE_GC_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "proto/cache.pb.h"

namespace granary {

// An evicted cache's directory is first renamed to this prefix + a unique suffix (so that a new
// Put of the same key never writes where the deletion is going on), then deleted.
inline constexpr char kEvictedDirPrefix[] = "evicted-";

// The file in the cache root naming the cluster (the dispatcher's journal) whose caches it
// holds (cache/FORMAT.md, "The cache root's owner"). Never collected.
inline constexpr char kCacheRootOwnerFileName[] = "GRANARY-CLUSTER";

struct CacheGcCounts {
  int64_t files = 0;
  int64_t dirs = 0;
};

// Deletes the cache directory `dir`: its chunk files, then the directory if that left it empty.
absl::StatusOr<CacheGcCounts> DeleteCacheDir(Env* env, const std::string& dir);

// In the complete cache `cache`'s directory `dir`, deletes every chunk file its manifest does
// not list (by file name): the chunks and temporaries of runs that lost their task.
absl::StatusOr<CacheGcCounts> DeleteStrayChunks(Env* env, const std::string& dir,
                                                const CacheState& cache);

// Under `cache_root`: deletes the directories of caches `caches` does not hold (evicted ones
// whose deletion a crash interrupted, runs lost with their state), probe directories and
// evicted caches' directories, and
// the stray chunks of each complete cache. The directories of incomplete caches (a Put epoch
// still writing) are left alone. For a dispatcher starting, before any worker probes.
absl::StatusOr<CacheGcCounts> CollectCacheGarbage(Env* env, const std::string& cache_root,
                                                  const std::map<std::string, CacheState>& caches);

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_GC_H_
