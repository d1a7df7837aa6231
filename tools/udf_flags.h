// The flags shared by every command that validates or runs pipelines: --plugin, and the Python
// UDFs' --allow_python_udfs and --python_interpreter.
#ifndef GRANARY_TOOLS_UDF_FLAGS_H_
#define GRANARY_TOOLS_UDF_FLAGS_H_

#include "absl/status/statusor.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/udf.h"

namespace granary {

// `registries` plus the UDFs of every --plugin library; errors name the plugin.
absl::StatusOr<PipelineRegistries> WithPluginsFromFlags(PipelineRegistries registries);

// The built-in sources, ops and UDFs and the cache's, with their implementations
// (PipelineRegistriesWithCache, cache/cache_ops.h), plus the --plugin UDFs, with the Python UDFs
// allowed or not and their interpreter as the flags say: what a command that runs pipelines
// builds them from. The dispatcher, which only validates pipelines and lists
// their splits, takes WithPluginsFromFlags(PipelineDeclarationsWithCache()) instead.
absl::StatusOr<PipelineRegistries> PipelineRegistriesFromFlags();

}  // namespace granary

#endif  // GRANARY_TOOLS_UDF_FLAGS_H_
