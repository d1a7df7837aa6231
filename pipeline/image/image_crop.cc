#include "pipeline/image/image_crop.h"

#include <cstring>
#include <utility>

#include "common/status_macros.h"
#include "pipeline/core/udf_tensor_access.h"

namespace granary {

Tensor CropImage(Tensor image, const CropWindow& window) {
  const int64_t h = image.shape()[0];
  const int64_t w = image.shape()[1];
  const int64_t c = image.shape()[2];
  if (window.height == h && window.width == w) return image;
  const size_t pixel_bytes = c * DtypeSize(image.dtype());
  const size_t src_stride = w * pixel_bytes;
  const size_t row_bytes = window.width * pixel_bytes;
  Tensor out = Tensor::Uninitialized(image.dtype(), {window.height, window.width, c});
  const char* src = image.content().data() + window.y * src_stride + window.x * pixel_bytes;
  char* dst = out.mutable_bytes();
  for (int64_t r = 0; r < window.height; ++r) {
    std::memcpy(dst + r * row_bytes, src + r * src_stride, row_bytes);
  }
  return out;
}

absl::Status CropUdf::Map(Element& element, const UdfCall& call) const {
  ASSIGN_OR_RETURN(Tensor * t, MutableImageAt(element, index_, {DT_UINT8, DT_FLOAT}, name_));
  ASSIGN_OR_RETURN(const CropWindow window, Window(t->shape()[0], t->shape()[1], call));
  ASSIGN_OR_RETURN(*t, Finish(CropImage(std::move(*t), window)));
  return absl::OkStatus();
}

}  // namespace granary
