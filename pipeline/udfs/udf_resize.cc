// resize: bilinear resize of the image at `index` (uint8 or float32 [height, width, channels])
// to [height, width, channels] of the same dtype. params: index (default 0), height, width
// (each at most kMaxImageSide, their product at most kMaxImagePixels; an output above
// kMaxElementBytes is ResourceExhausted: pipeline/core/limits.h).
// Sampling: pipeline/image/image_resize.h.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/image/image_resize.h"
#include "pipeline/core/limits.h"
#include "pipeline/core/udf_tensor_access.h"

namespace granary {
namespace {

constexpr char kName[] = "resize";

class Resize : public Udf {
 public:
  Resize(int64_t index, int64_t height, int64_t width)
      : index_(index), height_(height), width_(width) {}

  absl::Status Map(Element& element, const UdfCall&) const override {
    ASSIGN_OR_RETURN(Tensor * t, MutableImageAt(element, index_, {DT_UINT8, DT_FLOAT}, kName));
    ASSIGN_OR_RETURN(*t, ResizeImage(std::move(*t), height_, width_, kName));
    return absl::OkStatus();
  }

 private:
  const int64_t index_;
  const int64_t height_;
  const int64_t width_;
};

}  // namespace

void RegisterResizeUdf(UdfRegistry* registry) {
  UdfInfo info = ResizeUdfDeclaration();
  info.factory = [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
    ASSIGN_OR_RETURN(const ResizeConfig config, ReadResizeConfig(p));
    return std::make_unique<Resize>(config.index, config.size.height, config.size.width);
  };
  registry->Register(std::move(info)).IgnoreError();
}

}  // namespace granary
