#include "pipeline/spec/builtin_declarations.h"

#include "pipeline/sources/builtin_sources.h"
#include "pipeline/spec/op_declarations.h"
#include "pipeline/spec/udf_declarations.h"

namespace granary {

PipelineRegistries BuiltinDeclarations() {
  PipelineRegistries registries;
  RegisterBuiltinSources(&registries.sources);
  RegisterBuiltinOpDeclarations(&registries.ops);
  RegisterBuiltinUdfDeclarations(&registries.udfs);
  return registries;
}

}  // namespace granary
