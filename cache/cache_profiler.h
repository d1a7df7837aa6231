// CacheProfiler: what a worker measures of a cache_policy auto job's pipeline before its first
// epoch, for the dispatcher's CachePlanner (cache_planner.h). Online, on the worker's own cores
// and on the cache's own storage — nothing is looked up in a table.
//
// The pipeline runs stage by stage on the first `sample_records` source records of epoch 0's
// split plan, each stage as epoch 0 (the pinned prefix, cache_policy.h):
//   stage 0 reads the records from the source and writes them as probe chunk 0;
//   stage k reads probe chunk k−1 through cache_read, runs the ops between candidate points k−1
//     and k, and writes their output as probe chunk k — with the real Put (CachePut: write,
//     sync, commit), timed apart;
//   each chunk k is then read back alone through cache_read (the Get's read), timed;
//   the ops after the last candidate run the same way, their output dropped.
// A stage's ops time is its time less the read of its input, so that the profile holds for each
// candidate k: the segment before it, its elements and bytes, its write and its read seconds —
// and the time of the whole pipeline is the source plus every segment plus the tail.
// The probe chunks live in `probe_dir` (under the cache root, so that the probe measures the
// cache's storage) and are deleted before returning.
#ifndef GRANARY_CACHE_CACHE_PROFILER_H_
#define GRANARY_CACHE_CACHE_PROFILER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/env.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/udf.h"
#include "proto/cache.pb.h"
#include "proto/dispatcher.pb.h"

namespace granary {

struct CacheProfilerOptions {
  // Reads the source (the worker's confined Env) and writes the probe chunks.
  Env* env = Env::Default();
  // Resolves the pipeline's source, ops and UDFs. Not owned; must be set.
  const PipelineRegistries* registries = nullptr;
  // Once notified, the profile stops at its next element with Cancelled (a worker stopping).
  // Not owned; may be null.
  const absl::Notification* stop = nullptr;
};

// Measures `request.pipeline()` at `request.cache_points()`. Errors: the pipeline's (naming the
// op, file or record), a candidate that is not a mark point, an empty source, the probe's I/O;
// Cancelled once options.stop is notified.
absl::StatusOr<CacheProfile> ProfileCachePoints(const CacheProfileRequest& request,
                                                const CacheProfilerOptions& options);

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_PROFILER_H_
