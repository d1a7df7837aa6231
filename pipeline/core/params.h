// Params: the validated parameters of a source, op or UDF.
//
// Parameters arrive as a google.protobuf.Struct (from JSON). Each source, op and UDF declares
// ParamSpecs; Params::Create rejects unknown names, missing required ones and wrong types with
// an InvalidArgument that names the owner ("op 3 (map, udf 'random_crop')") and the parameter.
// After creation the getters cannot fail. Immutable; thread-safe.
#ifndef GRANARY_PIPELINE_CORE_PARAMS_H_
#define GRANARY_PIPELINE_CORE_PARAMS_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/struct.pb.h"

namespace granary {

enum class ParamType { kInt, kFloat, kBool, kString, kIntList, kFloatList, kStringList };

struct ParamSpec {
  std::string name;
  ParamType type;
  bool required = false;
};

class Params {
 public:
  Params() = default;
  static absl::StatusOr<Params> Create(const google::protobuf::Struct& values,
                                       const std::vector<ParamSpec>& specs,
                                       absl::string_view owner);

  bool Has(absl::string_view name) const;
  // Each getter returns the value of a declared parameter of that type, or `fallback` when the
  // parameter was not given. REQUIRES: `name` was declared with the matching ParamType.
  int64_t GetInt(absl::string_view name, int64_t fallback = 0) const;
  double GetFloat(absl::string_view name, double fallback = 0) const;
  bool GetBool(absl::string_view name, bool fallback = false) const;
  std::string GetString(absl::string_view name, std::string fallback = "") const;
  std::vector<int64_t> GetIntList(absl::string_view name) const;
  std::vector<double> GetFloatList(absl::string_view name) const;
  std::vector<std::string> GetStringList(absl::string_view name) const;

  // An InvalidArgument for a value that has the right type but is out of range, in the same
  // words as Create's errors: "<owner>: param '<name>' <problem>".
  absl::Status Invalid(absl::string_view name, absl::string_view problem) const;
  const std::string& owner() const { return owner_; }

 private:
  const google::protobuf::Value* Find(absl::string_view name) const;

  google::protobuf::Struct values_;
  std::string owner_;
};

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_PARAMS_H_
