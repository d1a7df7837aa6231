// random_crop: crops the image at `index` (uint8 or float32 [height, width, channels]) to a
// window of the requested size at a random position. params: index (default 0), and either
// height + width (pixels) or fraction (of each side, in (0, 1]; the crop side is
// max(1, round(side * fraction))). height and width are bounded as resize's (pipeline/core/limits.h).
//
// The offsets are drawn from StatelessRandom(call.random_key): first the row offset, uniform in
// [0, height - crop_height], then the column offset, uniform in [0, width - crop_width]. The
// same element and key therefore always give the same crop.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/stateless_random.h"
#include "common/status_macros.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/image/image_crop.h"
#include "pipeline/core/limits.h"
#include "pipeline/core/udf_tensor_access.h"

namespace granary {
namespace {

constexpr char kName[] = "random_crop";

class RandomCrop : public CropUdf {
 public:
  // fraction > 0 selects the fractional mode; otherwise height and width are used.
  RandomCrop(int64_t index, int64_t height, int64_t width, double fraction)
      : CropUdf(kName, index), height_(height), width_(width), fraction_(fraction) {}

  absl::StatusOr<CropWindow> Window(int64_t h, int64_t w, const UdfCall& call) const override {
    int64_t crop_h = height_;
    int64_t crop_w = width_;
    if (fraction_ > 0) {
      crop_h = std::max<int64_t>(1, std::llround(h * fraction_));
      crop_w = std::max<int64_t>(1, std::llround(w * fraction_));
    }
    if (h < crop_h || w < crop_w) {
      return absl::InvalidArgumentError(absl::StrCat(kName, ": image ", h, "x", w,
                                                     " is smaller than the crop ", crop_h, "x",
                                                     crop_w, " (height x width)"));
    }
    StatelessRandom rng(call.random_key);
    const int64_t y = static_cast<int64_t>(rng.Uniform(h - crop_h + 1));
    const int64_t x = static_cast<int64_t>(rng.Uniform(w - crop_w + 1));
    return CropWindow{y, x, crop_h, crop_w};
  }

  absl::StatusOr<Tensor> Finish(Tensor cropped) const override { return cropped; }

 private:
  const int64_t height_;
  const int64_t width_;
  const double fraction_;
};

}  // namespace

void RegisterRandomCropUdf(UdfRegistry* registry) {
  UdfInfo info = RandomCropUdfDeclaration();
  info.factory = [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
    ASSIGN_OR_RETURN(const RandomCropConfig config, ReadRandomCropConfig(p));
    return std::make_unique<RandomCrop>(config.index, config.height, config.width,
                                        config.fraction);
  };
  registry->Register(std::move(info)).IgnoreError();
}

}  // namespace granary
