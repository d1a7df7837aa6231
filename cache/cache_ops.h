// The cache's part of a pipeline (DESIGN.md §5), registered like any other op and source: the
// cache_write op, which hands the elements passing it to the run's CacheSink (cache_sink.h), and
// the cache_read source, which reads a Put epoch's chunks (cache/FORMAT.md) under the run's
// CacheChunkGuard (cache_chunk_guard.h). Both are inserted by the dispatcher
// (cache_policy.h: WithCacheWrite, ReadingFromCache), never written by users; the sink and the
// guard reach them through IteratorContext::resources (pipeline/core/run_resources.h).
#ifndef GRANARY_CACHE_CACHE_OPS_H_
#define GRANARY_CACHE_CACHE_OPS_H_

#include "pipeline/core/op.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/source.h"

namespace granary {

// Registers cache_write into `ops` and cache_read into `sources`; AlreadyExists naming the one
// already registered.
absl::Status RegisterCacheOps(OpRegistry* ops, SourceRegistry* sources);

// The built-in sources, ops and UDFs plus the cache's: what a worker, the dispatcher and the
// granary commands build pipelines from.
PipelineRegistries PipelineRegistriesWithCache();

// One registration per file.
OpInfo CacheWriteOp();
SourceInfo CacheReadSource();

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_OPS_H_
