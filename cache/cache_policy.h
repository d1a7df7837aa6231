// Cache placement (DESIGN.md §5): where a job's cache_policy puts the cache in its pipeline, the
// key that identifies the cached data, and the pipelines that write and read it.
//
// The cached prefix is the source plus the first `cache_point` ops of the user's pipeline. It is
// evaluated as epoch 0 in every epoch of a caching job (its split plan and its random draws;
// IteratorContext::cached_prefix_ops), so the epoch that writes the cache (Put), the epochs that
// read it (Get) and any epoch that computes it meanwhile all see the same prefix output — the
// behaviour of tf.data's cache. Ops after the cache point run with the real epoch.
#ifndef GRANARY_CACHE_CACHE_POLICY_H_
#define GRANARY_CACHE_CACHE_POLICY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/cache.pb.h"
#include "proto/pipeline.pb.h"

namespace granary {

// "compute", "full", "at_mark", "auto" <-> CachePolicy. InvalidArgument naming the value
// otherwise.
absl::StatusOr<CachePolicy> ParseCachePolicy(absl::string_view name);
std::string CachePolicyName(CachePolicy policy);

// The number of ops in the cached prefix: all of them (full), or those up to and including the
// first mark op (at_mark); nullopt for compute. InvalidArgument for at_mark on a pipeline
// without a mark op, and for auto, whose cache point the dispatcher decides (MarkPoints are its
// candidates).
absl::StatusOr<std::optional<int>> CachePoint(const PipelineDef& def, CachePolicy policy);

// The ops every epoch of a job with `policy` runs as epoch 0, over epoch 0's split plan: the
// cache point for full and at_mark; for auto every op up to and including the last mark,
// whichever mark the dispatcher decides to cache at (or none), so that the job's data does not
// depend on a decision taken from timings. nullopt for compute. InvalidArgument for at_mark and
// auto on a pipeline without a mark op.
absl::StatusOr<std::optional<int>> PinnedPrefixOps(const PipelineDef& def, CachePolicy policy);

// The cache points a mark op allows, ascending: each mark's index + 1.
std::vector<int> MarkPoints(const PipelineDef& def);

// The cached prefix of `def`: its source and first `cache_point` ops.
PipelineDef CachedPrefix(const PipelineDef& def, int cache_point);

// Identifies the cached data: hex XXH64 of the prefix's deterministic serialization, seeded
// with the job seed (the prefix's random draws depend on it), and of `data_identity` when it is
// not empty — the dispatcher's data roots (SECURITY.md), so that a cache made of the files one
// configuration could read is not served to another. Jobs whose prefixes, seeds and data
// identities are equal share a cache.
std::string CacheKey(const PipelineDef& def, int cache_point, uint64_t seed,
                     absl::string_view data_identity = "");

// The pipeline of a cache-writing (Put) epoch: `def` with a cache_write op after its first
// `cache_point` ops.
PipelineDef WithCacheWrite(const PipelineDef& def, int cache_point);

// The pipeline of a cache-reading (Get) epoch: a cache_read source followed by the ops after
// the cache point, which keep their indices (PipelineDef.cached_ops). Its splits come from
// ChunkSplits, not from enumerating the source (whose files are `cache_dir`'s chunks).
PipelineDef ReadingFromCache(const PipelineDef& def, int cache_point,
                             const std::string& cache_dir);

// The split plan of a Get epoch: one split per chunk of the manifest, in order, each carrying
// the chunk's record count and manifest entry (which the reader checks the file against).
std::vector<Split> ChunkSplits(const google::protobuf::RepeatedPtrField<CacheChunk>& chunks);

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_POLICY_H_
