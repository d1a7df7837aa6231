#include "pipeline/core/udf_tensor_access.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "pipeline/core/limits.h"
#include "pipeline/core/tensor.h"

namespace granary {

const ParamSpec kTensorIndexParam{"index", ParamType::kInt};

absl::StatusOr<int64_t> TensorIndexParam(const Params& params) {
  const int64_t index = params.GetInt(kTensorIndexParam.name, 0);
  if (index < 0) {
    return params.Invalid(kTensorIndexParam.name, absl::StrCat("must be >= 0, got ", index));
  }
  return index;
}

absl::StatusOr<ImageSize> ImageSizeParams(const Params& p) {
  const int64_t height = p.GetInt("height");
  const int64_t width = p.GetInt("width");
  if (height <= 0) return p.Invalid("height", absl::StrCat("must be positive, got ", height));
  if (width <= 0) return p.Invalid("width", absl::StrCat("must be positive, got ", width));
  RETURN_IF_ERROR(CheckParamLimit(p, "height", height, kMaxImageSide, "kMaxImageSide"));
  RETURN_IF_ERROR(CheckParamLimit(p, "width", width, kMaxImageSide, "kMaxImageSide"));
  RETURN_IF_ERROR(
      CheckParamLimit(p, "height' * 'width", height * width, kMaxImagePixels, "kMaxImagePixels"));
  return ImageSize{height, width};
}

absl::StatusOr<const Tensor*> TensorAt(const Element& element, int64_t index,
                                       std::initializer_list<DataType> dtypes,
                                       absl::string_view udf) {
  if (index < 0 || index >= static_cast<int64_t>(element.tensors.size())) {
    return absl::InvalidArgumentError(absl::StrCat(udf, ": tensor index ", index,
                                                   " is out of range: the element has ",
                                                   element.tensors.size(), " tensors"));
  }
  const Tensor& t = element.tensors[index];
  for (DataType d : dtypes) {
    if (t.dtype() == d) return &t;
  }
  std::vector<absl::string_view> names;
  for (DataType d : dtypes) names.push_back(DataTypeName(d));
  return absl::InvalidArgumentError(absl::StrCat(udf, ": tensor ", index, " is ", t.DebugString(),
                                                 ", need ", absl::StrJoin(names, " or ")));
}

absl::StatusOr<Tensor*> MutableTensorAt(Element& element, int64_t index,
                                        std::initializer_list<DataType> dtypes,
                                        absl::string_view udf) {
  auto t = TensorAt(element, index, dtypes, udf);
  if (!t.ok()) return t.status();
  return const_cast<Tensor*>(*t);
}

absl::StatusOr<Tensor*> MutableImageAt(Element& element, int64_t index,
                                       std::initializer_list<DataType> dtypes,
                                       absl::string_view udf) {
  auto t = MutableTensorAt(element, index, dtypes, udf);
  if (!t.ok()) return t.status();
  if ((*t)->rank() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(udf, ": tensor ", index, " is ",
                                                   (*t)->DebugString(),
                                                   ", need an image [height, width, channels]"));
  }
  return *t;
}

}  // namespace granary
