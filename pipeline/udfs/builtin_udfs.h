// The built-in UDFs' implementations, one registration function per file: each registers the
// UDF's declaration (pipeline/spec/udf_declarations.h: params, role, validate, and the reading
// of its params into its config, the one place they are checked) with its factory.
// RegisterBuiltinUdfs calls them all.
//
// Unless stated otherwise an image UDF works on the tensor at param `index` (default 0), an
// image being a uint8 or float32 tensor of shape [height, width, channels].
#ifndef GRANARY_PIPELINE_UDFS_BUILTIN_UDFS_H_
#define GRANARY_PIPELINE_UDFS_BUILTIN_UDFS_H_

#include "pipeline/core/udf.h"

namespace granary {

void RegisterBuiltinUdfs(UdfRegistry* registry);

// parse_example: one DT_STRING scalar holding a serialized tf.train.Example -> one tensor per
//   requested feature. params: keys (string list), dtypes (string list: "bytes", "int64",
//   "float" for a scalar that must have exactly one value; "bytes_list", "int64_list",
//   "float_list" for a 1-D tensor of all values).
void RegisterParseExampleUdf(UdfRegistry* registry);
// decode_jpeg / decode_image: encoded bytes (DT_STRING scalar) -> uint8 [h, w, channels].
//   decode_image accepts JPEG and PNG. params: index, channels (default 3).
void RegisterDecodeImageUdfs(UdfRegistry* registry);
// random_crop: params index, and either height+width or fraction (of each side).
void RegisterRandomCropUdf(UdfRegistry* registry);
// random_resized_crop: torchvision's RandomResizedCrop. params: index, height, width (output),
//   scale, ratio ([min, max]).
void RegisterRandomResizedCropUdf(UdfRegistry* registry);
// random_flip: horizontal flip with probability `probability` (default 0.5). params: index.
void RegisterRandomFlipUdf(UdfRegistry* registry);
// resize: bilinear. params: index, height, width.
void RegisterResizeUdf(UdfRegistry* registry);
// normalize: -> float32 (x * scale - mean[c]) / std[c]. params: index, scale (default 1/255),
//   mean, std (float lists, one per channel or one for all).
void RegisterNormalizeUdf(UdfRegistry* registry);
// cast: params index, dtype.
void RegisterCastUdf(UdfRegistry* registry);
// Text and test helpers: non_empty (predicate), string_length, modulo (predicate), add.
void RegisterBasicUdfs(UdfRegistry* registry);
// simulate_cost: sleeps us_per_element µs, the element unchanged (wall time without CPU, for
// measuring the resource policies on one machine).
void RegisterSimulateCostUdf(UdfRegistry* registry);

}  // namespace granary

#endif  // GRANARY_PIPELINE_UDFS_BUILTIN_UDFS_H_
