// RunHooks: what one run of a task does besides producing elements, behind an interface so that
// the task runner knows nothing of caches. A plain task's run has none (this base class); a
// cache-writing task's run writes the elements passing its cache_write op into chunk files and
// commits them with its checkpoints and at its end (cache/cache_run_hooks.h).
//
// The order of the calls around a checkpoint (TaskRun): the iterator's state is saved (on the
// producer's thread), then Saved(); then, on the checkpoint writer's thread,
// BeforeCheckpointWrite(token), the checkpoint is written (only if that succeeded), and
// AfterCheckpointWrite(token). Finish() when the iterator ends, before the task is reported
// finished. Thread-compatible, but BeforeCheckpointWrite and AfterCheckpointWrite run on the
// writer's thread while the producer goes on (one checkpoint write at a time).
#ifndef GRANARY_WORKER_RUN_HOOKS_H_
#define GRANARY_WORKER_RUN_HOOKS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/core/run_resources.h"
#include "proto/cache.pb.h"

namespace granary {

class RunHooks {
 public:
  virtual ~RunHooks() = default;
  // Lends the run's iterators what its ops and sources need (IteratorContext::resources), owned
  // by these hooks: a cache-writing run's CacheSink, a cache-reading run's CacheChunkGuard.
  virtual void LendResources(RunResources* resources) {}
  // Right after the iterator's state was saved: a token for what that state covers.
  virtual int64_t Saved() { return 0; }
  // Before the checkpoint of that state is written; an error skips the write.
  virtual absl::Status BeforeCheckpointWrite(int64_t token) { return absl::OkStatus(); }
  // Once that checkpoint is durable.
  virtual absl::Status AfterCheckpointWrite(int64_t token) { return absl::OkStatus(); }
  // At the iterator's end: the cache chunks the run wrote, to report with TaskFinished. An
  // error keeps the task from being reported finished.
  virtual absl::StatusOr<std::vector<CacheChunk>> Finish() {
    return std::vector<CacheChunk>();
  }
};

// Makes the hooks of each new run of a task.
using RunHooksFactory = std::function<std::unique_ptr<RunHooks>()>;

}  // namespace granary

#endif  // GRANARY_WORKER_RUN_HOOKS_H_
