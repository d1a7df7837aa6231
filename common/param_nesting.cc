#include "common/param_nesting.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"

namespace granary {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

// Levels of objects and lists in `value`, min(its depth, budget + 1): the count looks no deeper
// than `budget` levels, so a hostile value cannot make it recurse deeply.
int Nesting(const Value& value, int budget) {
  if (!value.has_struct_value() && !value.has_list_value()) return 0;
  if (budget == 0) return 1;
  int deepest = 0;
  if (value.has_struct_value()) {
    for (const auto& [name, field] : value.struct_value().fields()) {
      deepest = std::max(deepest, Nesting(field, budget - 1));
    }
  } else {
    for (const Value& element : value.list_value().values()) {
      deepest = std::max(deepest, Nesting(element, budget - 1));
    }
  }
  return deepest + 1;
}

absl::Status CheckStruct(const Struct& params, absl::string_view owner, absl::string_view field) {
  for (const auto& [name, value] : params.fields()) {
    if (Nesting(value, kMaxParamNesting) > kMaxParamNesting) {
      return absl::InvalidArgumentError(absl::StrCat(owner, ": ", field, " '", name,
                                                     "' nests more than ", kMaxParamNesting,
                                                     " levels deep (kMaxParamNesting)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string OpLabel(int index, const OpDef& op) {
  if (op.udf().empty()) return absl::StrCat("op ", index, " (", op.op(), ")");
  return absl::StrCat("op ", index, " (", op.op(), ", udf '", op.udf(), "')");
}

absl::Status CheckParamNesting(const PipelineDef& def) {
  RETURN_IF_ERROR(CheckStruct(def.source().params(),
                              absl::StrCat("source (", def.source().type(), ")"), "params"));
  for (int i = 0; i < def.ops_size(); ++i) {
    const std::string label = OpLabel(i, def.ops(i));
    RETURN_IF_ERROR(CheckStruct(def.ops(i).params(), label, "params"));
    RETURN_IF_ERROR(CheckStruct(def.ops(i).udf_params(), label, "udfParams"));
  }
  return absl::OkStatus();
}

}  // namespace granary
