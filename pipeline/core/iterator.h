// Iterator: the pull interface every source and op implements (DESIGN.md §2).
//
// An iterator yields a deterministic sequence of elements given its input order. Its whole
// position can be saved after any number n of elements and restored into a freshly built
// iterator of the same pipeline, after which it yields exactly what the original would have
// yielded from element n on — byte for byte. This is what checkpoints and exactly-once recovery
// stand on.
//
// Thread-compatible: GetNext, Save and Restore are called from one thread at a time (an
// iterator may run threads of its own internally).
#ifndef GRANARY_PIPELINE_CORE_ITERATOR_H_
#define GRANARY_PIPELINE_CORE_ITERATOR_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "common/env.h"
#include "pipeline/core/element.h"
#include "pipeline/core/iterator_state.h"
#include "pipeline/core/run_resources.h"
#include "transport/buffer_pool.h"

namespace granary {

class Autotuner;

// Counters the iterators of one run add to, read by whoever runs it (local_runner.h, a worker's
// task). Thread-safe.
struct IteratorStats {
  // Elements ignore_errors dropped before the iterators' current position (a restored
  // ignore_errors adds those dropped before its saved position).
  std::atomic<int64_t> skipped_elements{0};
};

// What every iterator of one pipeline run shares.
struct IteratorContext {
  Env* env = Env::Default();
  // The job seed and the epoch: with an element's provenance they key all randomness.
  uint64_t seed = 0;
  int64_t epoch = 0;
  // Ops with (user) index below this belong to a cached prefix and run as epoch 0 whatever
  // `epoch` is, so every epoch sees the prefix output the cache holds (cache/cache_policy.h).
  int cached_prefix_ops = 0;
  // What the run lends its ops and sources by type (run_resources.h): a cache-writing task's
  // CacheSink, a cache-reading task's CacheChunkGuard (cache/cache_ops.h).
  RunResources resources;
  // Where the run's counters go; null: not counted. Not owned.
  IteratorStats* stats = nullptr;
  // Where the batch op allocates its batches' wire images (a worker serving clients on its host
  // passes its shared-memory pool, transport/shm_backing.h). Not owned.
  BufferPool* pool = BufferPool::Default();
  // Where stages given num_threads 0 / buffer_size 0 register their knobs (autotuner.h); set by
  // Pipeline::MakeIterator for a pipeline that has such stages. Not owned.
  Autotuner* autotuner = nullptr;
};

class Iterator {
 public:
  virtual ~Iterator() = default;

  // Produces the next element into `*out` and sets `*end_of_sequence` = false, or sets
  // `*end_of_sequence` = true when the sequence is exhausted (and keeps returning that).
  // Errors name what is at fault (file, op, UDF, split and record). After an error the
  // iterator must not be used again, except to be destroyed — with one exception: after an
  // error of its UDF for one element (IsUdfElementError, udf_invoker.h), map, parallel_map and
  // filter go on with the next element, which is what ignore_errors relies on.
  virtual absl::Status GetNext(Element* out, bool* end_of_sequence) = 0;

  // Writes the iterator's complete position (buffers included) under `writer`.
  virtual absl::Status Save(StateWriter& writer) = 0;

  // Restores a position written by Save. REQUIRES: called on a freshly built iterator of the
  // same pipeline and context, before any GetNext.
  virtual absl::Status Restore(const StateReader& reader) = 0;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_ITERATOR_H_
