#include "pipeline/udfs/builtin_udfs.h"

namespace granary {

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
