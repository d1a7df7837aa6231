#include "pipeline/core/pipeline_registries.h"

#include "pipeline/ops/builtin_ops.h"
#include "pipeline/sources/builtin_sources.h"

namespace granary {

PipelineRegistries PipelineRegistries::WithBuiltins() {
  PipelineRegistries registries;
  RegisterBuiltinSources(&registries.sources);
  RegisterBuiltinOps(&registries.ops);
  registries.udfs = UdfRegistry::WithBuiltins();
  return registries;
}

}  // namespace granary
