#include "dispatcher/python_function_grant.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "pipeline/spec/udf_declarations.h"

namespace granary {

absl::Status CheckPythonFunctionGrant(const PipelineDef& pipeline, const Caller& caller,
                                      const std::vector<std::string>& granted) {
  if (!caller.authenticated) return absl::OkStatus();
  const auto op = std::find_if(pipeline.ops().begin(), pipeline.ops().end(),
                               [](const OpDef& op) { return IsPythonUdf(op.udf()); });
  if (op == pipeline.ops().end()) return absl::OkStatus();
  if (std::find(granted.begin(), granted.end(), kEveryClient) != granted.end() ||
      std::find(granted.begin(), granted.end(), caller.client) != granted.end()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "pipeline op ", op - pipeline.ops().begin(), " (", op->op(), ", UDF ", op->udf(),
      ") runs a Python function on the workers, and client '", caller.client,
      "' may not: the dispatcher's --python_udf_clients does not name it (SECURITY.md)"));
}

}  // namespace granary
