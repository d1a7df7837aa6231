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
