// CacheChunkRecovery: the worker's CacheChunkGuard (cache/cache_chunk_guard.h) for the runs
// of a cache-reading (Get) task.
//
// StartMacCheck checks a chunk's records against the manifest's MAC under the chunk key derived
// from the dispatcher's capability key (security/chunk_mac.h). When a chunk fails any check,
// Recompute asks the dispatcher (RecomputeCacheChunk), which journals the cache invalid — no
// later epoch reads it — and answers with the cached prefix, the seed and the splits the Put
// task that wrote the chunk read, in order. The prefix run as epoch 0 over those splits yields
// exactly that task's stream at the cache point (its randomness is keyed by seed and provenance
// only, pipeline/core/iterator.h), so the chunk's elements are that stream's
// [first_index, first_index + num_elements): Recompute computes and skips the elements before
// them. A chunk late in a long task costs that task's prefix up to it — a price paid only for
// a damaged or forged chunk.
//
// Thread-compatible; the readers it returns are independent of it.
#ifndef GRANARY_CACHE_CACHE_CHUNK_RECOVERY_H_
#define GRANARY_CACHE_CACHE_CHUNK_RECOVERY_H_

#include <memory>
#include <string>
#include <vector>

#include "cache/cache_chunk_guard.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/udf.h"
#include "security/chunk_mac.h"
#include "worker/dispatcher_connection.h"

namespace granary {

class CacheChunkRecovery : public CacheChunkGuard {
 public:
  // `dispatcher` and `registries` must outlive this and the readers it returns.
  CacheChunkRecovery(DispatcherConnection* dispatcher, int64_t task_id, int64_t generation,
                     ChunkMacKey key, const PipelineRegistries* registries)
      : dispatcher_(dispatcher),
        task_id_(task_id),
        generation_(generation),
        key_(std::move(key)),
        registries_(registries) {}

  std::unique_ptr<MacCheck> StartMacCheck(const CacheChunk& chunk) const override;
  absl::StatusOr<std::unique_ptr<SplitReader>> Recompute(const CacheChunk& chunk,
                                                         int64_t records_done,
                                                         const absl::Status& problem,
                                                         const SplitOpenContext& context) override;

 private:
  DispatcherConnection* const dispatcher_;
  const int64_t task_id_;
  const int64_t generation_;
  const ChunkMacKey key_;
  const PipelineRegistries* const registries_;
};

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_CHUNK_RECOVERY_H_
