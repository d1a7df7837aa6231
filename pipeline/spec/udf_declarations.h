// The built-in UDFs' declarations: for each UDF, its name, kind, param specs, role and
// `validate` (UdfInfo, pipeline/core/udf.h) — everything but the factory — and the function
// that reads its params into what it runs with (its config). That function is the only place a
// UDF's params are checked: `validate` is its status, and the UDF's factory
// (pipeline/udfs/udf_<name>.cc, which adds itself to the declaration) calls it to build.
// Linking this needs no UDF implementation and no image codec: the dispatcher validates
// pipelines with these declarations (builtin_declarations.h).
//
// What each UDF does is documented beside its implementation (pipeline/udfs/builtin_udfs.h).
// Unless stated otherwise an image UDF works on the tensor at param `index` (default 0;
// TensorIndexParam, pipeline/core/udf_tensor_access.h). Errors come from params.Invalid.
#ifndef GRANARY_PIPELINE_SPEC_UDF_DECLARATIONS_H_
#define GRANARY_PIPELINE_SPEC_UDF_DECLARATIONS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/core/params.h"
#include "pipeline/core/tensor.h"
#include "pipeline/core/udf.h"
#include "pipeline/core/udf_tensor_access.h"

namespace granary {

// The declarations of every built-in UDF, without factories (RegisterBuiltinUdfs,
// pipeline/udfs/builtin_udfs.h, registers them with theirs).
void RegisterBuiltinUdfDeclarations(UdfRegistry* registry);

// parse_example: keys (string list, at least one), dtypes (one per key: bytes, int64, float,
// bytes_list, int64_list, float_list).
enum class ExampleFeatureKind { kBytes, kInt64, kFloat };
struct ExampleFeature {
  std::string key;
  std::string dtype;  // As given, for errors.
  ExampleFeatureKind kind;
  bool list;  // A 1-D tensor of all values, else a scalar that must have exactly one.
};
absl::StatusOr<std::vector<ExampleFeature>> ReadParseExampleConfig(const Params& params);
UdfInfo ParseExampleUdfDeclaration();

// decode_jpeg, decode_image: index, channels (0, 1 or 3; default 3).
struct DecodeImageConfig {
  int64_t index = 0;
  int channels = 3;
};
absl::StatusOr<DecodeImageConfig> ReadDecodeImageConfig(const Params& params);
UdfInfo DecodeJpegUdfDeclaration();
UdfInfo DecodeImageUdfDeclaration();

// random_crop: index, and either height + width (ImageSizeParams) or fraction (in (0, 1]).
struct RandomCropConfig {
  int64_t index = 0;
  // The crop's size when fraction is 0.
  int64_t height = 0;
  int64_t width = 0;
  // > 0: the crop's sides are this fraction of the image's.
  double fraction = 0;
};
absl::StatusOr<RandomCropConfig> ReadRandomCropConfig(const Params& params);
UdfInfo RandomCropUdfDeclaration();

// random_resized_crop: index, height + width (the output), scale (default [0.08, 1]; max at
// most 1) and ratio (default [3/4, 4/3]), each [min, max] finite with 0 < min <= max.
struct RandomResizedCropConfig {
  int64_t index = 0;
  ImageSize size;
  double min_scale = 0;
  double max_scale = 0;
  double min_ratio = 0;
  double max_ratio = 0;
  // Decode large windows scaled down in the DCT domain when fused with the decode before
  // (decode_crop_fusion.h): approximate, opt-in.
  bool dct_scaling = false;
};
absl::StatusOr<RandomResizedCropConfig> ReadRandomResizedCropConfig(const Params& params);
UdfInfo RandomResizedCropUdfDeclaration();

// random_flip: index, probability (in [0, 1], default 0.5).
struct RandomFlipConfig {
  int64_t index = 0;
  double probability = 0.5;
};
absl::StatusOr<RandomFlipConfig> ReadRandomFlipConfig(const Params& params);
UdfInfo RandomFlipUdfDeclaration();

// resize: index, height + width (ImageSizeParams).
struct ResizeConfig {
  int64_t index = 0;
  ImageSize size;
};
absl::StatusOr<ResizeConfig> ReadResizeConfig(const Params& params);
UdfInfo ResizeUdfDeclaration();

// normalize: index, scale (default 1/255), mean (default [0]) and std (default [1]): non-empty,
// std entries non-zero, per-channel lists of the same length.
struct NormalizeConfig {
  int64_t index = 0;
  float scale = 0;
  std::vector<float> mean;
  std::vector<float> std;
};
absl::StatusOr<NormalizeConfig> ReadNormalizeConfig(const Params& params);
UdfInfo NormalizeUdfDeclaration();

// cast: index, dtype (a numeric dtype's name).
struct CastConfig {
  int64_t index = 0;
  DataType dtype = DT_UINT8;
};
absl::StatusOr<CastConfig> ReadCastConfig(const Params& params);
UdfInfo CastUdfDeclaration();

// The text and test helpers: non_empty (a predicate) and string_length (index); modulo (a
// predicate: index, modulus > 0, remainder in [0, modulus)); add (index, value); fill_bytes
// (bytes, in [1, kMaxElementBytes]).
struct ModuloConfig {
  int64_t index = 0;
  int64_t modulus = 1;
  int64_t remainder = 0;
};
absl::StatusOr<ModuloConfig> ReadModuloConfig(const Params& params);
absl::StatusOr<int64_t> ReadFillBytesConfig(const Params& params);
UdfInfo NonEmptyUdfDeclaration();
UdfInfo StringLengthUdfDeclaration();
UdfInfo ModuloUdfDeclaration();
UdfInfo AddUdfDeclaration();
UdfInfo FillBytesUdfDeclaration();

// simulate_cost: us_per_element (in [0, 10^7]).
absl::StatusOr<int64_t> ReadSimulateCostConfig(const Params& params);
UdfInfo SimulateCostUdfDeclaration();

// python (map) and python_filter (filter): a Python function run in helper processes
// (pipeline/udfs/udf_python.h). function: its pickle (cloudpickle), base64-encoded;
// timeout_ms: how long one call may take before its helper is killed (default 60 s, at most an
// hour); determinism_check_every: the first call and then one in this many are made twice and
// their results compared (default 1000; 0: never).
struct PythonUdfConfig {
  std::string function;  // the pickle's bytes
  int64_t timeout_ms = 60'000;
  int64_t determinism_check_every = 1000;
};
absl::StatusOr<PythonUdfConfig> ReadPythonUdfConfig(const Params& params);
UdfInfo PythonMapUdfDeclaration();
UdfInfo PythonFilterUdfDeclaration();
inline constexpr char kPythonMapUdf[] = "python";
inline constexpr char kPythonFilterUdf[] = "python_filter";
// Whether the UDF named `udf` runs a Python function (code of the pipeline's author).
inline bool IsPythonUdf(std::string_view udf) {
  return udf == kPythonMapUdf || udf == kPythonFilterUdf;
}

}  // namespace granary

#endif  // GRANARY_PIPELINE_SPEC_UDF_DECLARATIONS_H_
