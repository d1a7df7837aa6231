// parse_example: an element holding one serialized tf.train.Example (a DT_STRING scalar)
// becomes one tensor per requested feature, in the order of `keys`:
//   "bytes"  -> string scalar    "bytes_list" -> string [n]
//   "int64"  -> int64 scalar     "int64_list" -> int64 [n]
//   "float"  -> float32 scalar   "float_list" -> float32 [n]
// A scalar dtype needs exactly one value. A feature missing from the example is an error
// whatever its dtype; a feature present with no kind set counts as having zero values.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "proto/example.pb.h"

namespace granary {
namespace {

constexpr char kName[] = "parse_example";

using Kind = ExampleFeatureKind;
using FeatureSpec = ExampleFeature;

const char* ListName(Kind kind) {
  switch (kind) {
    case Kind::kBytes:
      return "bytes_list";
    case Kind::kInt64:
      return "int64_list";
    case Kind::kFloat:
      return "float_list";
  }
  return "?";
}

// The kind a feature actually holds, with its article.
const char* FeatureKindPhrase(const tfexample::Feature& feature) {
  switch (feature.kind_case()) {
    case tfexample::Feature::kBytesList:
      return "a bytes_list";
    case tfexample::Feature::kInt64List:
      return "an int64_list";
    case tfexample::Feature::kFloatList:
      return "a float_list";
    case tfexample::Feature::KIND_NOT_SET:
      break;
  }
  return "empty";
}

bool HasKind(const tfexample::Feature& feature, Kind kind) {
  switch (kind) {
    case Kind::kBytes:
      return feature.kind_case() == tfexample::Feature::kBytesList;
    case Kind::kInt64:
      return feature.kind_case() == tfexample::Feature::kInt64List;
    case Kind::kFloat:
      return feature.kind_case() == tfexample::Feature::kFloatList;
  }
  return false;
}

// Builds the tensor of one feature, moving its bytes out of `feature`.
absl::StatusOr<Tensor> FeatureToTensor(const FeatureSpec& spec, tfexample::Feature& feature) {
  const bool unset = feature.kind_case() == tfexample::Feature::KIND_NOT_SET;
  if (!unset && !HasKind(feature, spec.kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": feature '", spec.key, "' is ", FeatureKindPhrase(feature), ", dtype '",
        spec.dtype, "' needs ", spec.kind == Kind::kInt64 ? "an " : "a ", ListName(spec.kind)));
  }
  int64_t count = 0;
  if (!unset) {
    switch (spec.kind) {
      case Kind::kBytes:
        count = feature.bytes_list().value_size();
        break;
      case Kind::kInt64:
        count = feature.int64_list().value_size();
        break;
      case Kind::kFloat:
        count = feature.float_list().value_size();
        break;
    }
  }
  if (!spec.list && count != 1) {
    return absl::InvalidArgumentError(absl::StrCat(kName, ": feature '", spec.key, "' has ", count,
                                                   " values, dtype '", spec.dtype,
                                                   "' needs exactly 1"));
  }
  std::vector<int64_t> shape;
  if (spec.list) shape.push_back(count);
  switch (spec.kind) {
    case Kind::kBytes: {
      Tensor t(DT_STRING, std::move(shape));
      for (int64_t i = 0; i < count; ++i) {
        t.mutable_strings()[i] = std::move(*feature.mutable_bytes_list()->mutable_value(i));
      }
      return t;
    }
    case Kind::kInt64: {
      Tensor t(DT_INT64, std::move(shape));
      if (count > 0) {
        std::memcpy(t.data<int64_t>(), feature.int64_list().value().data(),
                    count * sizeof(int64_t));
      }
      return t;
    }
    case Kind::kFloat: {
      Tensor t(DT_FLOAT, std::move(shape));
      if (count > 0) {
        std::memcpy(t.data<float>(), feature.float_list().value().data(), count * sizeof(float));
      }
      return t;
    }
  }
  return absl::InternalError("unreachable");
}

std::string ListKeys(const tfexample::Example& example) {
  std::vector<std::string> keys;
  for (const auto& [key, unused] : example.features().feature()) keys.push_back(key);
  if (keys.empty()) return "none";
  std::sort(keys.begin(), keys.end());
  constexpr size_t kMaxShown = 20;
  const size_t total = keys.size();
  if (total > kMaxShown) keys.resize(kMaxShown);
  std::string out = absl::StrJoin(keys, ", ");
  if (total > kMaxShown) absl::StrAppend(&out, ", ... (", total, " in all)");
  return out;
}

class ParseExample : public Udf {
 public:
  explicit ParseExample(std::vector<FeatureSpec> specs) : specs_(std::move(specs)) {}

  absl::Status Map(Element& element, const UdfCall& call) const override {
    if (element.tensors.size() != 1 || element.tensors[0].dtype() != DT_STRING ||
        element.tensors[0].rank() != 0) {
      std::vector<std::string> got;
      for (const Tensor& t : element.tensors) got.push_back(t.DebugString());
      return absl::InvalidArgumentError(absl::StrCat(
          kName, ": need an element of one string[] (a serialized tf.train.Example), got ",
          element.tensors.size(), " tensors: ", got.empty() ? "none" : absl::StrJoin(got, ", ")));
    }
    tfexample::Example example;
    {
      // The serialized bytes are not needed once parsed.
      std::string serialized = std::move(element.tensors[0].mutable_strings()[0]);
      if (!example.ParseFromString(serialized)) {
        element.tensors[0].mutable_strings()[0] = std::move(serialized);
        return absl::InvalidArgumentError(
            absl::StrCat(kName, ": the input (", element.tensors[0].strings()[0].size(),
                         " bytes) is not a serialized tf.train.Example"));
      }
    }
    auto& features = *example.mutable_features()->mutable_feature();
    std::vector<Tensor> out;
    out.reserve(specs_.size());
    for (const FeatureSpec& spec : specs_) {
      auto it = features.find(spec.key);
      if (it == features.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(kName, ": feature '", spec.key,
                         "' missing (the example has: ", ListKeys(example), ")"));
      }
      ASSIGN_OR_RETURN(Tensor t, FeatureToTensor(spec, it->second));
      out.push_back(std::move(t));
    }
    element.tensors = std::move(out);
    return absl::OkStatus();
  }

 private:
  const std::vector<FeatureSpec> specs_;
};

}  // namespace

void RegisterParseExampleUdf(UdfRegistry* registry) {
  UdfInfo info = ParseExampleUdfDeclaration();
  info.factory = [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
    ASSIGN_OR_RETURN(std::vector<ExampleFeature> features, ReadParseExampleConfig(p));
    return std::make_unique<ParseExample>(std::move(features));
  };
  registry->Register(std::move(info)).IgnoreError();
}

}  // namespace granary
