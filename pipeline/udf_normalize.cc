// normalize: replaces the image at `index` (uint8 or float32 [height, width, channels]) by the
// float32 image (x * scale - mean[c]) / std[c]. params: index (default 0), scale (default
// 1/255), mean and std (number lists, each with one value for all channels or one per channel;
// default [0] and [1]). std entries must be non-zero.
//
// The formula is evaluated in float32 exactly as written, for uint8 through a per-channel table
// of all 256 results, so a uint8 image and the same image cast to float32 normalize to identical
// bytes.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/builtin_udfs.h"
#include "pipeline/udf_tensor_access.h"

namespace granary {
namespace {

constexpr char kName[] = "normalize";

class Normalize : public Udf {
 public:
  Normalize(int64_t index, float scale, std::vector<float> mean, std::vector<float> std)
      : index_(index), scale_(scale), mean_(std::move(mean)), std_(std::move(std)) {
    // Tables for uint8 input: one per entry of the longer list (one when both have one).
    const size_t tables = std::max(mean_.size(), std_.size());
    lut_.resize(tables * 256);
    for (size_t c = 0; c < tables; ++c) {
      for (int v = 0; v < 256; ++v) lut_[c * 256 + v] = Apply(static_cast<float>(v), c);
    }
  }

  absl::Status Map(Element& element, const UdfCall& call) const override {
    ASSIGN_OR_RETURN(Tensor * t, MutableImageAt(element, index_, {DT_UINT8, DT_FLOAT}, kName));
    const int64_t channels = t->shape()[2];
    RETURN_IF_ERROR(CheckChannels("mean", mean_.size(), *t));
    RETURN_IF_ERROR(CheckChannels("std", std_.size(), *t));
    const int64_t pixels = t->shape()[0] * t->shape()[1];
    if (t->dtype() == DT_UINT8) {
      Tensor out = Tensor::Uninitialized(DT_FLOAT, t->shape());
      NormalizeUint8(t->data<uint8_t>(), pixels, channels, out.data<float>());
      *t = std::move(out);
    } else {
      NormalizeFloat(t->data<float>(), pixels, channels);
    }
    return absl::OkStatus();
  }

 private:
  // The uint8 table of channel c.
  const float* Table(int64_t c) const {
    return lut_.size() == 256 ? lut_.data() : lut_.data() + c * 256;
  }

  void NormalizeUint8(const uint8_t* in, int64_t pixels, int64_t channels, float* out) const {
    if (lut_.size() == 256 || channels == 1) {
      const float* lut = Table(0);
      const int64_t n = pixels * channels;
      for (int64_t i = 0; i < n; ++i) out[i] = lut[in[i]];
    } else if (channels == 3) {
      const float* lut0 = Table(0);
      const float* lut1 = Table(1);
      const float* lut2 = Table(2);
      for (int64_t p = 0; p < pixels; ++p, in += 3, out += 3) {
        out[0] = lut0[in[0]];
        out[1] = lut1[in[1]];
        out[2] = lut2[in[2]];
      }
    } else {
      for (int64_t p = 0; p < pixels; ++p) {
        for (int64_t c = 0; c < channels; ++c) *out++ = Table(c)[*in++];
      }
    }
  }

  void NormalizeFloat(float* x, int64_t pixels, int64_t channels) const {
    if ((mean_.size() == 1 && std_.size() == 1) || channels == 1) {
      const int64_t n = pixels * channels;
      for (int64_t i = 0; i < n; ++i) x[i] = Apply(x[i], 0);
    } else if (channels == 3) {
      const float m0 = Mean(0), m1 = Mean(1), m2 = Mean(2);
      const float s0 = Std(0), s1 = Std(1), s2 = Std(2);
      for (int64_t p = 0; p < pixels; ++p, x += 3) {
        x[0] = (x[0] * scale_ - m0) / s0;
        x[1] = (x[1] * scale_ - m1) / s1;
        x[2] = (x[2] * scale_ - m2) / s2;
      }
    } else {
      for (int64_t p = 0; p < pixels; ++p) {
        for (int64_t c = 0; c < channels; ++c, ++x) *x = Apply(*x, c);
      }
    }
  }

  // The formula for channel c (lists of one value apply to every channel).
  float Mean(size_t c) const { return mean_.size() == 1 ? mean_[0] : mean_[c]; }
  float Std(size_t c) const { return std_.size() == 1 ? std_[0] : std_[c]; }
  float Apply(float x, size_t c) const { return (x * scale_ - Mean(c)) / Std(c); }

  static absl::Status CheckChannels(const char* param, size_t values, const Tensor& image) {
    if (values == 1 || static_cast<int64_t>(values) == image.shape()[2]) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(
        kName, ": ", param, " has ", values, " values but the image ", image.DebugString(), " has ",
        image.shape()[2], " channels; give one value or one per channel"));
  }

  const int64_t index_;
  const float scale_;
  const std::vector<float> mean_;
  const std::vector<float> std_;
  std::vector<float> lut_;
};

absl::StatusOr<std::unique_ptr<Udf>> MakeNormalize(const Params& p) {
  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
  const double scale = p.GetFloat("scale", 1.0 / 255.0);
  std::vector<float> mean{0.0f};
  std::vector<float> std{1.0f};
  if (p.Has("mean")) {
    const std::vector<double> values = p.GetFloatList("mean");
    if (values.empty()) return p.Invalid("mean", "must have at least one value");
    mean.assign(values.begin(), values.end());
  }
  if (p.Has("std")) {
    const std::vector<double> values = p.GetFloatList("std");
    if (values.empty()) return p.Invalid("std", "must have at least one value");
    for (size_t i = 0; i < values.size(); ++i) {
      if (static_cast<float>(values[i]) == 0.0f) {
        return p.Invalid("std", absl::StrCat("entry ", i, " is 0; std must be non-zero"));
      }
    }
    std.assign(values.begin(), values.end());
  }
  if (mean.size() > 1 && std.size() > 1 && mean.size() != std.size()) {
    return p.Invalid("std", absl::StrCat("has ", std.size(), " values but mean has ", mean.size(),
                                         "; per-channel lists must agree"));
  }
  return std::make_unique<Normalize>(index, static_cast<float>(scale), std::move(mean),
                                     std::move(std));
}

}  // namespace

void RegisterNormalizeUdf(UdfRegistry* registry) {
  registry
      ->Register({kName,
                  UdfKind::kMap,
                  {kTensorIndexParam,
                   {"scale", ParamType::kFloat},
                   {"mean", ParamType::kFloatList},
                   {"std", ParamType::kFloatList}},
                  MakeNormalize})
      .IgnoreError();
}

}  // namespace granary
