// The built-in registrations a pipeline is validated against without running it: the built-in
// sources (pipeline/sources/builtin_sources.h; a source's declaration includes its split
// enumeration, which validation needs), and the declarations of the built-in ops and UDFs
// (op_declarations.h, udf_declarations.h), without their factories. PipelineSpec::Create
// accepts and refuses exactly the pipelines it would with PipelineRegistries::WithBuiltins(),
// with the same errors; Pipeline::Create refuses to build from these (FailedPrecondition).
#ifndef GRANARY_PIPELINE_SPEC_BUILTIN_DECLARATIONS_H_
#define GRANARY_PIPELINE_SPEC_BUILTIN_DECLARATIONS_H_

#include "pipeline/core/pipeline_registries.h"

namespace granary {

PipelineRegistries BuiltinDeclarations();

}  // namespace granary

#endif  // GRANARY_PIPELINE_SPEC_BUILTIN_DECLARATIONS_H_
