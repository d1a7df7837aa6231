// The --plugin flag shared by every command that runs pipelines.
#ifndef GRANARY_TOOLS_UDF_FLAGS_H_
#define GRANARY_TOOLS_UDF_FLAGS_H_

#include "absl/status/statusor.h"
#include "pipeline/core/udf.h"

namespace granary {

// The built-in UDFs plus those of every --plugin library; errors name the plugin.
absl::StatusOr<UdfRegistry> UdfRegistryFromFlags();

}  // namespace granary

#endif  // GRANARY_TOOLS_UDF_FLAGS_H_
