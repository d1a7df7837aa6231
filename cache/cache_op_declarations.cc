#include "cache/cache_op_declarations.h"

#include "common/status_macros.h"
#include "pipeline/spec/builtin_declarations.h"

namespace granary {

OpInfo CacheWriteOpDeclaration() {
  OpInfo info;
  info.name = "cache_write";
  info.inserted_by_service = true;
  return info;
}

absl::Status RegisterCacheOpDeclarations(OpRegistry* ops, SourceRegistry* sources) {
  RETURN_IF_ERROR(ops->Register(CacheWriteOpDeclaration()));
  return sources->Register(CacheReadSource());
}

PipelineRegistries PipelineDeclarationsWithCache() {
  PipelineRegistries registries = BuiltinDeclarations();
  // Into registries that hold only the built-ins, whose names differ from the cache's.
  RegisterCacheOpDeclarations(&registries.ops, &registries.sources).IgnoreError();
  return registries;
}

}  // namespace granary
