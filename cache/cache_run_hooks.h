// The run hooks of the cache's tasks.
//
// CacheRunHooks: the run hooks of a cache-writing task (TaskDef.cache_dir set, DESIGN.md §5):
// a CachePut behind the run's cache_write op, whose sealed chunks are synced before each
// checkpoint is written and committed after it, and all committed at the run's end
// (cache/cache_put.h has the protocol). Thread-compatible as RunHooks. CacheReadHooks: those
// of a cache-reading task.
#ifndef GRANARY_CACHE_CACHE_RUN_HOOKS_H_
#define GRANARY_CACHE_CACHE_RUN_HOOKS_H_

#include "cache/cache_chunk_recovery.h"
#include "cache/cache_put.h"
#include "worker/run_hooks.h"

namespace granary {

class CacheRunHooks final : public RunHooks {
 public:
  explicit CacheRunHooks(const CachePutOptions& options) : put_(options) {}

  void LendResources(RunResources* resources) override { resources->Set<CacheSink>(&put_); }
  int64_t Saved() override { return put_.sealed(); }
  absl::Status BeforeCheckpointWrite(int64_t sealed) override { return put_.SyncSealed(sealed); }
  absl::Status AfterCheckpointWrite(int64_t sealed) override { return put_.CommitSealed(sealed); }
  absl::StatusOr<std::vector<CacheChunk>> Finish() override { return put_.Finish(); }

 private:
  CachePut put_;
};

// The run hooks of a cache-reading task: its chunks checked, and recomputed when they fail
// (cache_chunk_recovery.h).
class CacheReadHooks final : public RunHooks {
 public:
  explicit CacheReadHooks(CacheChunkRecovery recovery) : recovery_(std::move(recovery)) {}

  void LendResources(RunResources* resources) override {
    resources->Set<CacheChunkGuard>(&recovery_);
  }

 private:
  CacheChunkRecovery recovery_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_RUN_HOOKS_H_
