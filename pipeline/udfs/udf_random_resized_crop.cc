// random_resized_crop: the standard ImageNet training augmentation, torchvision's
// RandomResizedCrop — crops a random window of random area and aspect ratio from the image at
// `index` (uint8 or float32 [height, width, channels]) and resizes it to the output size.
// params: index (default 0), height and width (the output, required; bounded as resize's),
// scale ([min, max] fraction of the image's area, default [0.08, 1]), ratio ([min, max] width /
// height, default [3/4, 4/3]), dct_scaling (default false; see below).
//
// The window is torchvision's RandomResizedCrop.get_params, drawn from
// StatelessRandom(call.random_key): up to 10 attempts, each drawing the area fraction uniform in
// scale, then the log of the aspect ratio uniform in log(ratio); the window's width is
// round(sqrt(area * ratio)), its height round(sqrt(area / ratio)) (rounding half to even, as
// Python's round); the first attempt that fits draws its row offset uniform in
// [0, height - h], then its column offset in [0, width - w]. When none fits: the central crop
// of the image clamped to the ratio range. The resize is resize's (pipeline/image/image_resize.h:
// bilinear, half-pixel centers, no antialiasing — torchvision's tensor path antialiases when
// downscaling, so pixels differ from torchvision's while the windows are the same).
//
// dct_scaling (opt-in, approximate): right after a decode_jpeg / decode_image it runs fused with
// (decode_crop_fusion.h), a window at least twice the output size in both dimensions is decoded
// at 1/2, 1/4 or 1/8 in the DCT domain (the largest that keeps it at least the output size),
// then resized. The window drawn is the same; its pixels are close to, not equal to, the exact
// path's (measured in bench/RESULTS.md, "Decode-crop fusion"), and the same on every worker, so
// every epoch is still exactly once and seeds still give identical bytes. Elsewhere (not fused,
// or a PNG) the crop is exact.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/stateless_random.h"
#include "common/status_macros.h"
#include "pipeline/core/limits.h"
#include "pipeline/core/udf_tensor_access.h"
#include "pipeline/image/image_crop.h"
#include "pipeline/image/image_resize.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/builtin_udfs.h"

namespace granary {
namespace {

constexpr char kName[] = "random_resized_crop";
constexpr int kAttempts = 10;

class RandomResizedCrop : public CropUdf {
 public:
  RandomResizedCrop(int64_t index, int64_t height, int64_t width, double scale_min,
                    double scale_max, double ratio_min, double ratio_max, bool dct_scaling)
      : CropUdf(kName, index),
        height_(height),
        width_(width),
        scale_min_(scale_min),
        scale_max_(scale_max),
        ratio_min_(ratio_min),
        ratio_max_(ratio_max),
        dct_scaling_(dct_scaling) {}

  absl::StatusOr<CropWindow> Window(int64_t h, int64_t w, const UdfCall& call) const override {
    if (h == 0 || w == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(kName, ": cannot crop the empty image ", h, "x", w, " (height x width)"));
    }
    StatelessRandom rng(call.random_key);
    const double area = static_cast<double>(h) * static_cast<double>(w);
    const double log_min = std::log(ratio_min_);
    const double log_max = std::log(ratio_max_);
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      const double target = area * (scale_min_ + (scale_max_ - scale_min_) * rng.UniformDouble());
      const double aspect = std::exp(log_min + (log_max - log_min) * rng.UniformDouble());
      const auto crop_w = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
      const auto crop_h = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
      if (crop_w > 0 && crop_w <= w && crop_h > 0 && crop_h <= h) {
        const auto y = static_cast<int64_t>(rng.Uniform(h - crop_h + 1));
        const auto x = static_cast<int64_t>(rng.Uniform(w - crop_w + 1));
        return CropWindow{y, x, crop_h, crop_w};
      }
    }
    // The central crop, clamped to the ratio range.
    const double in_ratio = static_cast<double>(w) / static_cast<double>(h);
    int64_t crop_w = w;
    int64_t crop_h = h;
    if (in_ratio < ratio_min_) {
      crop_h = std::clamp<int64_t>(std::nearbyint(w / ratio_min_), 1, h);
    } else if (in_ratio > ratio_max_) {
      crop_w = std::clamp<int64_t>(std::nearbyint(h * ratio_max_), 1, w);
    }
    return CropWindow{(h - crop_h) / 2, (w - crop_w) / 2, crop_h, crop_w};
  }

  absl::StatusOr<Tensor> Finish(Tensor cropped) const override {
    return ResizeImage(std::move(cropped), height_, width_, kName);
  }

  std::optional<ScaledDecodeFloor> scaled_decode_floor() const override {
    if (!dct_scaling_) return std::nullopt;
    return ScaledDecodeFloor{height_, width_};
  }

 private:
  const int64_t height_;
  const int64_t width_;
  const double scale_min_;
  const double scale_max_;
  const double ratio_min_;
  const double ratio_max_;
  const bool dct_scaling_;
};

// A [min, max] param, `fallback` when absent.
}  // namespace

void RegisterRandomResizedCropUdf(UdfRegistry* registry) {
  UdfInfo info = RandomResizedCropUdfDeclaration();
  info.factory = [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
    ASSIGN_OR_RETURN(const RandomResizedCropConfig c, ReadRandomResizedCropConfig(p));
    return std::make_unique<RandomResizedCrop>(c.index, c.size.height, c.size.width, c.min_scale,
                                               c.max_scale, c.min_ratio, c.max_ratio,
                                               c.dct_scaling);
  };
  registry->Register(std::move(info)).IgnoreError();
}

}  // namespace granary
