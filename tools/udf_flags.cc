#include "tools/udf_flags.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "cache/cache_ops.h"
#include "common/status_macros.h"
#include "pipeline/udfs/udf_python.h"

ABSL_FLAG(std::vector<std::string>, plugin, {},
          "Comma-separated shared libraries of user UDFs to load (each exports "
          "GranaryRegisterUdfs).");

ABSL_FLAG(bool, allow_python_udfs, false,
          "Run the Python functions of clients' pipelines (Dataset.map(fn)) in helper processes "
          "here: code execution for whoever may submit jobs (SECURITY.md). Off: such a "
          "pipeline's tasks fail with PermissionDenied naming this flag.");
ABSL_FLAG(std::string, python_interpreter, "",
          "The Python interpreter the Python UDFs' helper processes run (with NumPy and the "
          "modules the functions import); default $GRANARY_PYTHON (which a pip-installed "
          "`granary` command sets to its virtualenv's), else /usr/bin/python3.");

namespace granary {

absl::StatusOr<PipelineRegistries> WithPluginsFromFlags(PipelineRegistries registries) {
  for (const std::string& path : absl::GetFlag(FLAGS_plugin)) {
    RETURN_IF_ERROR(LoadUdfPlugin(path, &registries.udfs));
  }
  return registries;
}

absl::StatusOr<PipelineRegistries> PipelineRegistriesFromFlags() {
  ASSIGN_OR_RETURN(PipelineRegistries registries,
                   WithPluginsFromFlags(PipelineRegistriesWithCache()));
  PythonUdfOptions python;
  python.allowed = absl::GetFlag(FLAGS_allow_python_udfs);
  python.interpreter = absl::GetFlag(FLAGS_python_interpreter);
  if (python.interpreter.empty()) {
    const char* from_environment = std::getenv("GRANARY_PYTHON");
    python.interpreter = from_environment != nullptr && *from_environment != '\0'
                             ? from_environment
                             : PythonUdfOptions{}.interpreter;
  }
  RegisterPythonUdfs(&registries.udfs, python);
  return registries;
}

}  // namespace granary
