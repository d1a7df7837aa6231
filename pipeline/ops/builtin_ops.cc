#include "pipeline/ops/builtin_ops.h"

namespace granary {

void RegisterBuiltinOps(OpRegistry* registry) {
  for (OpInfo info : {MapOp(), ParallelMapOp(), FilterOp(), ShuffleOp(), BatchOp(), TakeOp(),
                       SkipOp(), PrefetchOp(), MarkOp(), IgnoreErrorsOp()}) {
    registry->Register(std::move(info)).IgnoreError();
  }
}

}  // namespace granary
