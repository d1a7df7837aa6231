#include "pipeline/core/source.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace granary {

absl::Status SourceRegistry::Register(SourceInfo info) {
  if (Find(info.type) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("source '", info.type, "' is already registered"));
  }
  sources_.push_back(std::move(info));
  return absl::OkStatus();
}

const SourceInfo* SourceRegistry::Find(const std::string& type) const {
  for (const SourceInfo& info : sources_) {
    if (info.type == type) return &info;
  }
  return nullptr;
}

absl::StatusOr<const SourceInfo*> SourceRegistry::Get(const std::string& type) const {
  const SourceInfo* info = Find(type);
  if (info != nullptr) return info;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown type '", type, "' (known: ", absl::StrJoin(Types(), ", "),
      "; sources are registered by RegisterBuiltinSources in pipeline/sources/builtin_sources.h, "
      "RegisterCacheOps in cache/cache_ops.h, or a plugin)"));
}

std::vector<std::string> SourceRegistry::Types() const {
  std::vector<std::string> types;
  for (const SourceInfo& info : sources_) types.push_back(info.type);
  return types;
}

}  // namespace granary
