// Fuzz target: the parse_example UDF (pipeline/udfs/udf_parse_example.cc) on an arbitrary serialized
// tf.train.Example, with the feature specs of the test fixtures (bytes, int64, float, lists).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "fuzz/fuzz_util.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/core/element.h"
#include "pipeline/core/params.h"
#include "pipeline/core/tensor.h"
#include "pipeline/core/udf.h"

namespace {

std::unique_ptr<granary::Udf> MakeParseExample(const std::string& json) {
  granary::UdfRegistry registry;
  granary::RegisterParseExampleUdf(&registry);
  const granary::UdfInfo* info = registry.Find("parse_example");
  granary::fuzz::Check(info != nullptr, "parse_example is registered");
  google::protobuf::Struct values;
  granary::fuzz::Check(google::protobuf::util::JsonStringToMessage(json, &values).ok(),
                       "the spec is JSON");
  absl::StatusOr<granary::Params> params =
      granary::Params::Create(values, info->params, "udf 'parse_example'");
  granary::fuzz::Check(params.ok(), "the spec is valid");
  absl::StatusOr<std::unique_ptr<granary::Udf>> udf = info->factory(*params);
  granary::fuzz::Check(udf.ok(), "the UDF builds");
  return std::move(*udf);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The specs of the fixtures the seeds come from: ImageNet, TensorFlow's tutorial features and
  // images, and lists of every dtype.
  static const granary::Udf* const specs[] = {
      MakeParseExample(
          R"({"keys": ["image/encoded", "image/class/label", "image/height", "image/format",
                       "image/object/bbox/xmin", "image/class/synset"],
              "dtypes": ["bytes", "int64", "int64", "bytes", "float_list", "bytes_list"]})")
          .release(),
      MakeParseExample(R"({"keys": ["feature0", "feature1", "feature2", "feature3"],
                           "dtypes": ["int64", "int64", "bytes", "float"]})")
          .release(),
      MakeParseExample(R"({"keys": ["height", "width", "depth", "label", "image_raw"],
                           "dtypes": ["int64", "int64", "int64", "int64", "bytes"]})")
          .release(),
      MakeParseExample(R"({"keys": ["feature0", "feature2", "feature3"],
                           "dtypes": ["int64_list", "bytes_list", "float_list"]})")
          .release(),
  };
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (const granary::Udf* udf : specs) {
    granary::Element element;
    element.tensors.push_back(granary::Tensor::String(bytes));
    granary::UdfCall call;
    call.random_key = 1;
    (void)udf->Map(element, call);
  }
  return 0;
}
