// The --plugin flag shared by every command that runs pipelines.
#ifndef GRANARY_TOOLS_UDF_FLAGS_H_
#define GRANARY_TOOLS_UDF_FLAGS_H_

#include "absl/status/statusor.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/udf.h"

namespace granary {

// The built-in sources, ops and UDFs plus the UDFs of every --plugin library; errors name the
// plugin.
absl::StatusOr<PipelineRegistries> PipelineRegistriesFromFlags();

}  // namespace granary

#endif  // GRANARY_TOOLS_UDF_FLAGS_H_
