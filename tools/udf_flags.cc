#include "tools/udf_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "cache/cache_ops.h"
#include "common/status_macros.h"

ABSL_FLAG(std::vector<std::string>, plugin, {},
          "Comma-separated shared libraries of user UDFs to load (each exports "
          "GranaryRegisterUdfs).");

namespace granary {

absl::StatusOr<PipelineRegistries> WithPluginsFromFlags(PipelineRegistries registries) {
  for (const std::string& path : absl::GetFlag(FLAGS_plugin)) {
    RETURN_IF_ERROR(LoadUdfPlugin(path, &registries.udfs));
  }
  return registries;
}

absl::StatusOr<PipelineRegistries> PipelineRegistriesFromFlags() {
  return WithPluginsFromFlags(PipelineRegistriesWithCache());
}

}  // namespace granary
