// The declarations of the cache's part of a pipeline (cache_ops.h): the cache_write op without
// its factory, and the cache_read source (a source's declaration includes its validation and
// split enumeration; its readers come with it, linking only the cache's chunk format). Enough
// for PipelineSpec (pipeline/spec/pipeline_spec.h) to validate the pipelines the dispatcher
// rewrites (cache_policy.h) and list their splits, without linking the pipeline's op and UDF
// implementations: the dispatcher's registries are PipelineDeclarationsWithCache().
#ifndef GRANARY_CACHE_CACHE_OP_DECLARATIONS_H_
#define GRANARY_CACHE_CACHE_OP_DECLARATIONS_H_

#include "absl/status/status.h"
#include "pipeline/core/op.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/source.h"

namespace granary {

// Registers cache_write's declaration into `ops` and cache_read into `sources`; AlreadyExists
// naming the one already registered.
absl::Status RegisterCacheOpDeclarations(OpRegistry* ops, SourceRegistry* sources);

// The built-in declarations (pipeline/spec/builtin_declarations.h) plus the cache's: what the
// dispatcher validates pipelines and enumerates splits with.
PipelineRegistries PipelineDeclarationsWithCache();

// cache_write: inserted by the service (OpInfo::inserted_by_service), no params; its factory
// is added by CacheWriteOp (cache_ops.h).
OpInfo CacheWriteOpDeclaration();
// cache_read (source_cache_read.cc).
SourceInfo CacheReadSource();

}  // namespace granary

#endif  // GRANARY_CACHE_CACHE_OP_DECLARATIONS_H_
