#include "pipeline/sources/builtin_sources.h"

namespace granary {

void RegisterBuiltinSources(SourceRegistry* registry) {
  for (SourceInfo info : {RangeSource(), TfRecordSource(), TextLinesSource()}) {
    registry->Register(std::move(info)).IgnoreError();
  }
}

}  // namespace granary
