#include "pipeline/udfs/builtin_udfs.h"

#include "pipeline/udfs/udf_python.h"

namespace granary {

UdfRegistry UdfRegistry::WithBuiltins() {
  UdfRegistry registry;
  RegisterBuiltinUdfs(&registry);
  return registry;
}

void RegisterBuiltinUdfs(UdfRegistry* registry) {
  RegisterParseExampleUdf(registry);
  RegisterDecodeImageUdfs(registry);
  RegisterRandomCropUdf(registry);
  RegisterRandomResizedCropUdf(registry);
  RegisterRandomFlipUdf(registry);
  RegisterResizeUdf(registry);
  RegisterNormalizeUdf(registry);
  RegisterCastUdf(registry);
  RegisterBasicUdfs(registry);
  RegisterSimulateCostUdf(registry);
  // Not allowed to run unless the process says so (RegisterPythonUdfs again).
  RegisterPythonUdfs(registry, PythonUdfOptions{});
}

}  // namespace granary
