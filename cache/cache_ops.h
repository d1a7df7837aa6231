// The cache's part of a pipeline (DESIGN.md §5), registered like any other op and source: the
// cache_write op, which hands the elements passing it to the run's CacheSink (cache_sink.h), and
// the cache_read source, which reads a Put epoch's chunks (cache/FORMAT.md) under the run's
// CacheChunkGuard (cache_chunk_guard.h). Both are inserted by the dispatcher
// (cache_policy.h: WithCacheWrite, ReadingFromCache), never written by users; the sink and the
// guard reach them through IteratorContext::resources (pipeline/core/run_resources.h).
//
// Their declarations, which is all the dispatcher needs, are in cache_op_declarations.h; this
// adds cache_write's implementation (op_cache_write.cc) and is what a worker registers.
#ifndef GRANARY_CACHE_CACHE_OPS_H_
#define GRANARY_CACHE_CACHE_OPS_H_

#include "absl/status/status.h"
#include "cache/cache_op_declarations.h"
#include "pipeline/core/op.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/source.h"

namespace granary {

// Registers cache_write (with its factory) into `ops` and cache_read into `sources`;
// AlreadyExists naming the one already registered.
absl::Status RegisterCacheOps(OpRegistry* ops, SourceRegistry* sources);

// The built-in sources, ops and UDFs plus the cache's, all with their implementations: what a
// worker and the granary commands that run pipelines build them from.
PipelineRegistries PipelineRegistriesWithCache();

// CacheWriteOpDeclaration with its factory.
OpInfo CacheWriteOp();

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_OPS_H_
