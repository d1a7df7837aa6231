#include "pipeline/core/source.h"

namespace granary {
namespace {

const std::vector<SourceInfo>& Sources() {
  static const std::vector<SourceInfo>* const sources =
      new std::vector<SourceInfo>{RangeSource(), TfRecordSource(), TextLinesSource(),
                                  CacheReadSource()};
  return *sources;
}

}  // namespace

const SourceInfo* FindSource(const std::string& type) {
  for (const SourceInfo& info : Sources()) {
    if (info.type == type) return &info;
  }
  return nullptr;
}

std::vector<std::string> SourceTypes() {
  std::vector<std::string> types;
  for (const SourceInfo& info : Sources()) types.push_back(info.type);
  return types;
}

}  // namespace granary
