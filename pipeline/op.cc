#include "pipeline/core/op.h"

namespace granary {
namespace {

const std::vector<OpInfo>& Ops() {
  static const std::vector<OpInfo>* const ops = new std::vector<OpInfo>{
      MapOp(),  ParallelMapOp(), FilterOp(), ShuffleOp(),    BatchOp(),       TakeOp(),
      SkipOp(), PrefetchOp(),    MarkOp(),   CacheWriteOp(), IgnoreErrorsOp()};
  return *ops;
}

}  // namespace

const OpInfo* FindOp(const std::string& name) {
  for (const OpInfo& info : Ops()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::vector<std::string> OpNames() {
  std::vector<std::string> names;
  for (const OpInfo& info : Ops()) names.push_back(info.name);
  return names;
}

}  // namespace granary
