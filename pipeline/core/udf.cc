#include "pipeline/core/udf.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace granary {

absl::Status Udf::Map(Element& element, const UdfCall& call) const {
  return absl::UnimplementedError("this UDF is a predicate: use it with filter");
}

absl::StatusOr<bool> Udf::Keep(const Element& element, const UdfCall& call) const {
  return absl::UnimplementedError("this UDF is not a predicate: use it with map");
}

absl::Status UdfRegistry::Register(UdfInfo info) {
  if (Find(info.name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("UDF '", info.name, "' is already registered"));
  }
  udfs_.push_back(std::move(info));
  return absl::OkStatus();
}

const UdfInfo* UdfRegistry::Find(const std::string& name) const {
  for (const UdfInfo& info : udfs_) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::vector<std::string> UdfRegistry::Names() const {
  std::vector<std::string> names;
  for (const UdfInfo& info : udfs_) names.push_back(info.name);
  return names;
}

absl::Status LoadUdfPlugin(const std::string& path, UdfRegistry* registry) {
  // Plugins stay loaded for the life of the process: their UDFs are referenced until exit.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("plugin ", path, ": dlopen failed: ", dlerror()));
  }
  auto fn = reinterpret_cast<GranaryRegisterUdfsFn>(dlsym(handle, "GranaryRegisterUdfs"));
  if (fn == nullptr) {
    dlclose(handle);
    return absl::InvalidArgumentError(
        absl::StrCat("plugin ", path, ": does not export GranaryRegisterUdfs"));
  }
  const size_t before = registry->Names().size();
  fn(registry);
  if (registry->Names().size() == before) {
    return absl::InvalidArgumentError(absl::StrCat("plugin ", path, ": registered no UDF"));
  }
  return absl::OkStatus();
}

}  // namespace granary
