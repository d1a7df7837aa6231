#include "cache/cache_ops.h"

#include "common/status_macros.h"

namespace granary {

absl::Status RegisterCacheOps(OpRegistry* ops, SourceRegistry* sources) {
  RETURN_IF_ERROR(ops->Register(CacheWriteOp()));
  return sources->Register(CacheReadSource());
}

PipelineRegistries PipelineRegistriesWithCache() {
  PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  // Into registries that hold only the built-ins, whose names differ from the cache's.
  RegisterCacheOps(&registries.ops, &registries.sources).IgnoreError();
  return registries;
}

}  // namespace granary
