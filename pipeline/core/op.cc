#include "pipeline/core/op.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace granary {

absl::Status OpRegistry::Register(OpInfo info) {
  if (Find(info.name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("op '", info.name, "' is already registered"));
  }
  ops_.push_back(std::move(info));
  return absl::OkStatus();
}

const OpInfo* OpRegistry::Find(const std::string& name) const {
  for (const OpInfo& info : ops_) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

absl::StatusOr<const OpInfo*> OpRegistry::Get(const std::string& name) const {
  const OpInfo* info = Find(name);
  if (info != nullptr) return info;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown op '", name, "' (known: ", absl::StrJoin(Names(), ", "),
      "; ops are registered by RegisterBuiltinOps in pipeline/ops/builtin_ops.h, RegisterCacheOps in "
      "cache/cache_ops.h, or a plugin)"));
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> names;
  for (const OpInfo& info : ops_) names.push_back(info.name);
  return names;
}

}  // namespace granary
