#include "pipeline/udfs/builtin_udfs.h"

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
}

}  // namespace granary
