// random_resized_crop: the standard ImageNet training augmentation, torchvision's
// RandomResizedCrop — crops a random window of random area and aspect ratio from the image at
// `index` (uint8 or float32 [height, width, channels]) and resizes it to the output size.
// params: index (default 0), height and width (the output, required; bounded as resize's),
// scale ([min, max] fraction of the image's area, default [0.08, 1]), ratio ([min, max] width /
// height, default [3/4, 4/3]).
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
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/stateless_random.h"
#include "common/status_macros.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/image/image_crop.h"
#include "pipeline/image/image_resize.h"
#include "pipeline/core/limits.h"
#include "pipeline/core/udf_tensor_access.h"

namespace granary {
namespace {

constexpr char kName[] = "random_resized_crop";
constexpr int kAttempts = 10;

class RandomResizedCrop : public CropUdf {
 public:
  RandomResizedCrop(int64_t index, int64_t height, int64_t width, double scale_min,
                    double scale_max, double ratio_min, double ratio_max)
      : CropUdf(kName, index),
        height_(height),
        width_(width),
        scale_min_(scale_min),
        scale_max_(scale_max),
        ratio_min_(ratio_min),
        ratio_max_(ratio_max) {}

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

 private:
  const int64_t height_;
  const int64_t width_;
  const double scale_min_;
  const double scale_max_;
  const double ratio_min_;
  const double ratio_max_;
};

// A [min, max] param, `fallback` when absent.
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

absl::StatusOr<std::unique_ptr<Udf>> MakeRandomResizedCrop(const Params& p) {
  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
  ASSIGN_OR_RETURN(const ImageSize size, ImageSizeParams(p));
  ASSIGN_OR_RETURN(const auto scale, RangeParam(p, "scale", {0.08, 1.0}));
  if (scale.second > 1) {
    return p.Invalid("scale",
                     absl::StrCat("max must be at most 1 (the whole image), got ", scale.second));
  }
  ASSIGN_OR_RETURN(const auto ratio, RangeParam(p, "ratio", {3.0 / 4.0, 4.0 / 3.0}));
  return std::make_unique<RandomResizedCrop>(index, size.height, size.width, scale.first,
                                             scale.second, ratio.first, ratio.second);
}

}  // namespace

void RegisterRandomResizedCropUdf(UdfRegistry* registry) {
  registry
      ->Register({kName,
                  UdfKind::kMap,
                  {kTensorIndexParam,
                   {"height", ParamType::kInt, true},
                   {"width", ParamType::kInt, true},
                   {"scale", ParamType::kFloatList},
                   {"ratio", ParamType::kFloatList}},
                  MakeRandomResizedCrop,
                  UdfRole::kResampling})
      .IgnoreError();
}

}  // namespace granary
