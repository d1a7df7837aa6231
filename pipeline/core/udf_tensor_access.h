// Checked access to an element's tensors for UDFs: errors name the UDF, the index and what was
// found ("random_crop: tensor 0 is string[], need uint8 or float32"); and the "index" param
// by which a UDF is told which tensor to work on, and the "height" and "width" params of an
// image size.
#ifndef GRANARY_PIPELINE_CORE_UDF_TENSOR_ACCESS_H_
#define GRANARY_PIPELINE_CORE_UDF_TENSOR_ACCESS_H_

#include <cstdint>
#include <initializer_list>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/core/element.h"
#include "pipeline/core/params.h"

namespace granary {

// The spec of the optional int param "index": which tensor of the element a UDF works on.
extern const ParamSpec kTensorIndexParam;

// The value of the "index" param (0 if not given); InvalidArgument via params.Invalid if it is
// negative ("param 'index' must be >= 0, got -1").
absl::StatusOr<int64_t> TensorIndexParam(const Params& params);

// An image size from the int params "height" and "width": each positive and at most
// kMaxImageSide, their product at most kMaxImagePixels (pipeline/core/limits.h); InvalidArgument via
// params.Invalid naming the param otherwise.
struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
};
absl::StatusOr<ImageSize> ImageSizeParams(const Params& params);

// The tensor at `index` of `element` if it exists and has one of `dtypes`; InvalidArgument
// otherwise, prefixed by `udf`.
absl::StatusOr<const Tensor*> TensorAt(const Element& element, int64_t index,
                                       std::initializer_list<DataType> dtypes,
                                       absl::string_view udf);
absl::StatusOr<Tensor*> MutableTensorAt(Element& element, int64_t index,
                                        std::initializer_list<DataType> dtypes,
                                        absl::string_view udf);

inline absl::StatusOr<const Tensor*> TensorAt(const Element& element, int64_t index, DataType dtype,
                                              absl::string_view udf) {
  return TensorAt(element, index, {dtype}, udf);
}
inline absl::StatusOr<Tensor*> MutableTensorAt(Element& element, int64_t index, DataType dtype,
                                               absl::string_view udf) {
  return MutableTensorAt(element, index, {dtype}, udf);
}

// The tensor at `index` if it is an image: rank 3 [height, width, channels] of one of `dtypes`.
absl::StatusOr<Tensor*> MutableImageAt(Element& element, int64_t index,
                                       std::initializer_list<DataType> dtypes,
                                       absl::string_view udf);

}  // namespace granary

#endif  // GRANARY_PIPELINE_CORE_UDF_TENSOR_ACCESS_H_
