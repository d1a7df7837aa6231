#include "pipeline/spec/udf_declarations.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/core/limits.h"

namespace granary {
namespace {

// A validate that checks params by reading them into a UDF's config.
template <typename ReadConfig>
std::function<absl::Status(const Params&)> ValidatedBy(ReadConfig read) {
  return [read](const Params& params) { return read(params).status(); };
}

UdfInfo Declaration(std::string name, UdfKind kind, std::vector<ParamSpec> params,
                    std::function<absl::Status(const Params&)> validate,
                    UdfRole role = UdfRole::kOther) {
  UdfInfo info;
  info.name = std::move(name);
  info.kind = kind;
  info.params = std::move(params);
  info.validate = std::move(validate);
  info.role = role;
  return info;
}

// A UDF whose only param to check is `index`.
UdfInfo IndexOnlyDeclaration(std::string name, UdfKind kind, std::vector<ParamSpec> params) {
  return Declaration(std::move(name), kind, std::move(params), ValidatedBy(TensorIndexParam));
}

constexpr std::pair<const char*, std::pair<ExampleFeatureKind, bool>> kExampleDtypes[] = {
    {"bytes", {ExampleFeatureKind::kBytes, false}},
    {"int64", {ExampleFeatureKind::kInt64, false}},
    {"float", {ExampleFeatureKind::kFloat, false}},
    {"bytes_list", {ExampleFeatureKind::kBytes, true}},
    {"int64_list", {ExampleFeatureKind::kInt64, true}},
    {"float_list", {ExampleFeatureKind::kFloat, true}},
};

constexpr char kNumericDtypes[] = "uint8, int32, int64, float32, float64, bool";

constexpr int64_t kMaxSimulatedMicroseconds = 10'000'000;

// A [min, max] float list param, `fallback` when not given.
absl::StatusOr<std::pair<double, double>> RangeParam(const Params& p, const char* name,
                                                     std::pair<double, double> fallback) {
  if (!p.Has(name)) return fallback;
  const std::vector<double> range = p.GetFloatList(name);
  if (range.size() != 2) {
    return p.Invalid(name, absl::StrCat("must be [min, max], got ", range.size(), " values"));
  }
  if (!(range[0] > 0 && range[0] <= range[1] && std::isfinite(range[1]))) {
    return p.Invalid(name, absl::StrCat("must be finite with 0 < min <= max, got [", range[0], ", ",
                                        range[1], "]"));
  }
  return std::pair<double, double>{range[0], range[1]};
}

}  // namespace

absl::StatusOr<std::vector<ExampleFeature>> ReadParseExampleConfig(const Params& params) {
  const std::vector<std::string> keys = params.GetStringList("keys");
  const std::vector<std::string> dtypes = params.GetStringList("dtypes");
  if (keys.empty()) return params.Invalid("keys", "must name at least one feature");
  if (dtypes.size() != keys.size()) {
    return params.Invalid("dtypes", absl::StrCat("has ", dtypes.size(), " entries but keys has ",
                                                 keys.size(), "; give one dtype per key"));
  }
  std::vector<ExampleFeature> features;
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto* found = std::find_if(std::begin(kExampleDtypes), std::end(kExampleDtypes),
                                     [&](const auto& d) { return dtypes[i] == d.first; });
    if (found == std::end(kExampleDtypes)) {
      return params.Invalid("dtypes",
                            absl::StrCat("entry ", i, " ('", dtypes[i], "', for key '", keys[i],
                                         "') is not one of bytes, int64, float, bytes_list, "
                                         "int64_list, float_list"));
    }
    features.push_back({keys[i], dtypes[i], found->second.first, found->second.second});
  }
  return features;
}

UdfInfo ParseExampleUdfDeclaration() {
  return Declaration(
      "parse_example", UdfKind::kMap,
      {{"keys", ParamType::kStringList, true}, {"dtypes", ParamType::kStringList, true}},
      ValidatedBy(ReadParseExampleConfig), UdfRole::kParser);
}

absl::StatusOr<DecodeImageConfig> ReadDecodeImageConfig(const Params& p) {
  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
  const int64_t channels = p.GetInt("channels", 3);
  if (channels != 0 && channels != 1 && channels != 3) {
    return p.Invalid("channels", absl::StrCat("must be 0 (as encoded), 1 or 3, got ", channels));
  }
  return DecodeImageConfig{index, static_cast<int>(channels)};
}

UdfInfo DecodeJpegUdfDeclaration() {
  return Declaration("decode_jpeg", UdfKind::kMap,
                     {kTensorIndexParam, {"channels", ParamType::kInt}},
                     ValidatedBy(ReadDecodeImageConfig), UdfRole::kDecoder);
}

UdfInfo DecodeImageUdfDeclaration() {
  UdfInfo info = DecodeJpegUdfDeclaration();
  info.name = "decode_image";
  return info;
}

absl::StatusOr<RandomCropConfig> ReadRandomCropConfig(const Params& p) {
  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
  const bool has_size = p.Has("height") || p.Has("width");
  const bool has_fraction = p.Has("fraction");
  if (has_size && has_fraction) {
    return p.Invalid("fraction",
                     "cannot be combined with height/width: give either height and "
                     "width, or fraction");
  }
  if (!has_size && !has_fraction) {
    return absl::InvalidArgumentError(
        absl::StrCat(p.owner(), ": give either params height and width, or param fraction"));
  }
  if (has_fraction) {
    const double fraction = p.GetFloat("fraction");
    if (!(fraction > 0 && fraction <= 1)) {
      return p.Invalid("fraction", absl::StrCat("must be in (0, 1], got ", fraction));
    }
    return RandomCropConfig{index, 0, 0, fraction};
  }
  if (!p.Has("height")) return p.Invalid("height", "is missing: width needs height");
  if (!p.Has("width")) return p.Invalid("width", "is missing: height needs width");
  ASSIGN_OR_RETURN(const ImageSize size, ImageSizeParams(p));
  return RandomCropConfig{index, size.height, size.width, 0};
}

UdfInfo RandomCropUdfDeclaration() {
  return Declaration("random_crop", UdfKind::kMap,
                     {kTensorIndexParam,
                      {"height", ParamType::kInt},
                      {"width", ParamType::kInt},
                      {"fraction", ParamType::kFloat}},
                     ValidatedBy(ReadRandomCropConfig), UdfRole::kPixelSelecting);
}

absl::StatusOr<RandomResizedCropConfig> ReadRandomResizedCropConfig(const Params& p) {
  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
  ASSIGN_OR_RETURN(const ImageSize size, ImageSizeParams(p));
  ASSIGN_OR_RETURN(const auto scale, RangeParam(p, "scale", {0.08, 1.0}));
  if (scale.second > 1) {
    return p.Invalid("scale",
                     absl::StrCat("max must be at most 1 (the whole image), got ", scale.second));
  }
  ASSIGN_OR_RETURN(const auto ratio, RangeParam(p, "ratio", {3.0 / 4.0, 4.0 / 3.0}));
  return RandomResizedCropConfig{index,
                                 size,
                                 scale.first,
                                 scale.second,
                                 ratio.first,
                                 ratio.second,
                                 p.GetBool("dct_scaling", false)};
}

UdfInfo RandomResizedCropUdfDeclaration() {
  return Declaration("random_resized_crop", UdfKind::kMap,
                     {kTensorIndexParam,
                      {"height", ParamType::kInt, true},
                      {"width", ParamType::kInt, true},
                      {"scale", ParamType::kFloatList},
                      {"ratio", ParamType::kFloatList},
                      {"dct_scaling", ParamType::kBool}},
                     ValidatedBy(ReadRandomResizedCropConfig), UdfRole::kResampling);
}

absl::StatusOr<RandomFlipConfig> ReadRandomFlipConfig(const Params& p) {
  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
  const double probability = p.GetFloat("probability", 0.5);
  if (!(probability >= 0 && probability <= 1)) {
    return p.Invalid("probability", absl::StrCat("must be in [0, 1], got ", probability));
  }
  return RandomFlipConfig{index, probability};
}

UdfInfo RandomFlipUdfDeclaration() {
  return Declaration("random_flip", UdfKind::kMap,
                     {kTensorIndexParam, {"probability", ParamType::kFloat}},
                     ValidatedBy(ReadRandomFlipConfig), UdfRole::kPixelSelecting);
}

absl::StatusOr<ResizeConfig> ReadResizeConfig(const Params& p) {
  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
  ASSIGN_OR_RETURN(const ImageSize size, ImageSizeParams(p));
  return ResizeConfig{index, size};
}

UdfInfo ResizeUdfDeclaration() {
  return Declaration(
      "resize", UdfKind::kMap,
      {kTensorIndexParam, {"height", ParamType::kInt, true}, {"width", ParamType::kInt, true}},
      ValidatedBy(ReadResizeConfig), UdfRole::kResampling);
}

absl::StatusOr<NormalizeConfig> ReadNormalizeConfig(const Params& p) {
  NormalizeConfig config;
  ASSIGN_OR_RETURN(config.index, TensorIndexParam(p));
  config.scale = static_cast<float>(p.GetFloat("scale", 1.0 / 255.0));
  config.mean = {0.0f};
  config.std = {1.0f};
  if (p.Has("mean")) {
    const std::vector<double> values = p.GetFloatList("mean");
    if (values.empty()) return p.Invalid("mean", "must have at least one value");
    config.mean.assign(values.begin(), values.end());
  }
  if (p.Has("std")) {
    const std::vector<double> values = p.GetFloatList("std");
    if (values.empty()) return p.Invalid("std", "must have at least one value");
    for (size_t i = 0; i < values.size(); ++i) {
      if (static_cast<float>(values[i]) == 0.0f) {
        return p.Invalid("std", absl::StrCat("entry ", i, " is 0; std must be non-zero"));
      }
    }
    config.std.assign(values.begin(), values.end());
  }
  if (config.mean.size() > 1 && config.std.size() > 1 && config.mean.size() != config.std.size()) {
    return p.Invalid("std", absl::StrCat("has ", config.std.size(), " values but mean has ",
                                         config.mean.size(), "; per-channel lists must agree"));
  }
  return config;
}

UdfInfo NormalizeUdfDeclaration() {
  return Declaration("normalize", UdfKind::kMap,
                     {kTensorIndexParam,
                      {"scale", ParamType::kFloat},
                      {"mean", ParamType::kFloatList},
                      {"std", ParamType::kFloatList}},
                     ValidatedBy(ReadNormalizeConfig), UdfRole::kPixelwise);
}

absl::StatusOr<CastConfig> ReadCastConfig(const Params& p) {
  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
  const std::string name = p.GetString("dtype");
  absl::StatusOr<DataType> dtype = DataTypeFromName(name);
  if (!dtype.ok()) {
    return p.Invalid("dtype", absl::StrCat("is '", name, "', not one of ", kNumericDtypes));
  }
  if (*dtype == DT_STRING) {
    return p.Invalid("dtype", absl::StrCat("is 'string'; cast converts only between numeric "
                                           "dtypes (",
                                           kNumericDtypes, ")"));
  }
  return CastConfig{index, *dtype};
}

UdfInfo CastUdfDeclaration() {
  return Declaration("cast", UdfKind::kMap,
                     {kTensorIndexParam, {"dtype", ParamType::kString, true}},
                     ValidatedBy(ReadCastConfig));
}

absl::StatusOr<ModuloConfig> ReadModuloConfig(const Params& p) {
  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
  const int64_t modulus = p.GetInt("modulus");
  const int64_t remainder = p.GetInt("remainder");
  if (modulus <= 0) return p.Invalid("modulus", "must be positive");
  if (remainder < 0 || remainder >= modulus) {
    return p.Invalid("remainder", "must be in [0, modulus)");
  }
  return ModuloConfig{index, modulus, remainder};
}

absl::StatusOr<int64_t> ReadFillBytesConfig(const Params& p) {
  const int64_t bytes = p.GetInt("bytes");
  if (bytes < 1 || bytes > kMaxElementBytes) return p.Invalid("bytes", "must be in [1, 2^31]");
  return bytes;
}

UdfInfo NonEmptyUdfDeclaration() {
  return IndexOnlyDeclaration("non_empty", UdfKind::kPredicate, {kTensorIndexParam});
}

UdfInfo StringLengthUdfDeclaration() {
  return IndexOnlyDeclaration("string_length", UdfKind::kMap, {kTensorIndexParam});
}

UdfInfo ModuloUdfDeclaration() {
  return Declaration(
      "modulo", UdfKind::kPredicate,
      {kTensorIndexParam, {"modulus", ParamType::kInt, true}, {"remainder", ParamType::kInt}},
      ValidatedBy(ReadModuloConfig));
}

UdfInfo AddUdfDeclaration() {
  return IndexOnlyDeclaration("add", UdfKind::kMap,
                              {kTensorIndexParam, {"value", ParamType::kInt, true}});
}

UdfInfo FillBytesUdfDeclaration() {
  return Declaration("fill_bytes", UdfKind::kMap, {{"bytes", ParamType::kInt, true}},
                     ValidatedBy(ReadFillBytesConfig));
}

absl::StatusOr<int64_t> ReadSimulateCostConfig(const Params& p) {
  const int64_t us = p.GetInt("us_per_element");
  if (us < 0 || us > kMaxSimulatedMicroseconds) {
    return p.Invalid("us_per_element", "must be in [0, 10^7]");
  }
  return us;
}

UdfInfo SimulateCostUdfDeclaration() {
  return Declaration("simulate_cost", UdfKind::kMap, {{"us_per_element", ParamType::kInt, true}},
                     ValidatedBy(ReadSimulateCostConfig));
}

absl::StatusOr<PythonUdfConfig> ReadPythonUdfConfig(const Params& p) {
  PythonUdfConfig config;
  if (!absl::Base64Unescape(p.GetString("function"), &config.function) || config.function.empty()) {
    return p.Invalid("function",
                     "must be a Python function's pickle in base64 (what "
                     "granary.Dataset.map(fn) writes)");
  }
  config.timeout_ms = p.GetInt("timeout_ms", config.timeout_ms);
  if (config.timeout_ms < 1 || config.timeout_ms > 3'600'000) {
    return p.Invalid("timeout_ms", "must be in [1, 3600000] (milliseconds)");
  }
  config.determinism_check_every =
      p.GetInt("determinism_check_every", config.determinism_check_every);
  if (config.determinism_check_every < 0) {
    return p.Invalid("determinism_check_every", "must be at least 0 (0: no check)");
  }
  return config;
}

namespace {

std::vector<ParamSpec> PythonUdfParams() {
  return {{"function", ParamType::kString, true},
          {"timeout_ms", ParamType::kInt, false},
          {"determinism_check_every", ParamType::kInt, false}};
}

}  // namespace

UdfInfo PythonMapUdfDeclaration() {
  return Declaration(kPythonMapUdf, UdfKind::kMap, PythonUdfParams(),
                     ValidatedBy(ReadPythonUdfConfig));
}

UdfInfo PythonFilterUdfDeclaration() {
  return Declaration(kPythonFilterUdf, UdfKind::kPredicate, PythonUdfParams(),
                     ValidatedBy(ReadPythonUdfConfig));
}

void RegisterBuiltinUdfDeclarations(UdfRegistry* registry) {
  for (UdfInfo info :
       {ParseExampleUdfDeclaration(), DecodeJpegUdfDeclaration(), DecodeImageUdfDeclaration(),
        RandomCropUdfDeclaration(), RandomResizedCropUdfDeclaration(), RandomFlipUdfDeclaration(),
        ResizeUdfDeclaration(), NormalizeUdfDeclaration(), CastUdfDeclaration(),
        NonEmptyUdfDeclaration(), StringLengthUdfDeclaration(), ModuloUdfDeclaration(),
        AddUdfDeclaration(), FillBytesUdfDeclaration(), SimulateCostUdfDeclaration(),
        PythonMapUdfDeclaration(), PythonFilterUdfDeclaration()}) {
    registry->Register(std::move(info)).IgnoreError();
  }
}

}  // namespace granary
