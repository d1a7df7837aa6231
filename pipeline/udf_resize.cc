// resize: bilinear resize of the image at `index` (uint8 or float32 [height, width, channels])
// to [height, width, channels] of the same dtype. params: index (default 0), height, width
// (each at most kMaxImageSide, their product at most kMaxImagePixels; an output above
// kMaxElementBytes is ResourceExhausted: pipeline/limits.h).
//
// Sampling uses half-pixel centers (as tf.image.resize, OpenCV INTER_LINEAR and PIL without
// antialiasing): output pixel i samples the input at (i + 0.5) * in / out - 0.5, clamped to the
// image, so upscaling preserves the corner pixels. Arithmetic is float32; uint8 results are
// rounded to nearest and clamped to [0, 255].
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/builtin_udfs.h"
#include "pipeline/limits.h"
#include "pipeline/udf_tensor_access.h"

namespace granary {
namespace {

constexpr char kName[] = "resize";

// Where output coordinate i samples along one axis: between input i0 and i1 with weight w on i1.
struct Tap {
  int64_t i0;
  int64_t i1;
  float w;
};

std::vector<Tap> ComputeTaps(int64_t in, int64_t out) {
  std::vector<Tap> taps(out);
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t i = 0; i < out; ++i) {
    float src = (static_cast<float>(i) + 0.5f) * scale - 0.5f;
    src = std::min(std::max(src, 0.0f), static_cast<float>(in - 1));
    const int64_t i0 = static_cast<int64_t>(src);  // src >= 0, so truncation is floor.
    taps[i].i0 = i0;
    taps[i].i1 = std::min(i0 + 1, in - 1);
    taps[i].w = src - static_cast<float>(i0);
  }
  return taps;
}

inline void Store(float v, float* out) { *out = v; }
inline void Store(float v, uint8_t* out) {
  *out = static_cast<uint8_t>(std::min(std::max(v + 0.5f, 0.0f), 255.0f));
}

template <typename T>
void ResizeBilinear(const T* in, int64_t in_h, int64_t in_w, int64_t channels, T* out,
                    int64_t out_h, int64_t out_w) {
  const std::vector<Tap> ys = ComputeTaps(in_h, out_h);
  std::vector<Tap> xs = ComputeTaps(in_w, out_w);
  for (Tap& x : xs) {  // Column taps as element offsets within a row.
    x.i0 *= channels;
    x.i1 *= channels;
  }
  const int64_t in_stride = in_w * channels;
  for (int64_t y = 0; y < out_h; ++y) {
    const T* row0 = in + ys[y].i0 * in_stride;
    const T* row1 = in + ys[y].i1 * in_stride;
    const float wy = ys[y].w;
    T* dst = out + y * out_w * channels;
    for (int64_t x = 0; x < out_w; ++x) {
      const Tap& tx = xs[x];
      for (int64_t c = 0; c < channels; ++c) {
        const float p00 = static_cast<float>(row0[tx.i0 + c]);
        const float p01 = static_cast<float>(row0[tx.i1 + c]);
        const float p10 = static_cast<float>(row1[tx.i0 + c]);
        const float p11 = static_cast<float>(row1[tx.i1 + c]);
        const float top = p00 + (p01 - p00) * tx.w;
        const float bottom = p10 + (p11 - p10) * tx.w;
        Store(top + (bottom - top) * wy, dst++);
      }
    }
  }
}

class Resize : public Udf {
 public:
  Resize(int64_t index, int64_t height, int64_t width)
      : index_(index), height_(height), width_(width) {}

  absl::Status Map(Element& element, const UdfCall& call) const override {
    ASSIGN_OR_RETURN(Tensor * t, MutableImageAt(element, index_, {DT_UINT8, DT_FLOAT}, kName));
    const int64_t h = t->shape()[0];
    const int64_t w = t->shape()[1];
    const int64_t c = t->shape()[2];
    if (h == height_ && w == width_) return absl::OkStatus();
    if (h == 0 || w == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(kName, ": cannot resize the empty image ", t->DebugString()));
    }
    const int64_t out_bytes = height_ * width_ * c * DtypeSize(t->dtype());
    if (out_bytes > kMaxElementBytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          kName, ": resizing ", t->DebugString(), " to ", DataTypeName(t->dtype()), "[", height_,
          ",", width_, ",", c, "] would make ", HumanBytes(out_bytes), ", above the limit of ",
          HumanBytes(kMaxElementBytes), " per element (kMaxElementBytes, pipeline/limits.h)"));
    }
    Tensor out(t->dtype(), {height_, width_, c});
    if (t->dtype() == DT_UINT8) {
      ResizeBilinear(t->data<uint8_t>(), h, w, c, out.data<uint8_t>(), height_, width_);
    } else {
      ResizeBilinear(t->data<float>(), h, w, c, out.data<float>(), height_, width_);
    }
    *t = std::move(out);
    return absl::OkStatus();
  }

 private:
  const int64_t index_;
  const int64_t height_;
  const int64_t width_;
};

absl::StatusOr<std::unique_ptr<Udf>> MakeResize(const Params& p) {
  ASSIGN_OR_RETURN(const int64_t index, TensorIndexParam(p));
  const int64_t height = p.GetInt("height");
  const int64_t width = p.GetInt("width");
  if (height <= 0) return p.Invalid("height", absl::StrCat("must be positive, got ", height));
  if (width <= 0) return p.Invalid("width", absl::StrCat("must be positive, got ", width));
  RETURN_IF_ERROR(CheckParamLimit(p, "height", height, kMaxImageSide, "kMaxImageSide"));
  RETURN_IF_ERROR(CheckParamLimit(p, "width", width, kMaxImageSide, "kMaxImageSide"));
  RETURN_IF_ERROR(
      CheckParamLimit(p, "height' * 'width", height * width, kMaxImagePixels, "kMaxImagePixels"));
  return std::make_unique<Resize>(index, height, width);
}

}  // namespace

void RegisterResizeUdf(UdfRegistry* registry) {
  registry
      ->Register({kName,
                  UdfKind::kMap,
                  {kTensorIndexParam,
                   {"height", ParamType::kInt, true},
                   {"width", ParamType::kInt, true}},
                  MakeResize})
      .IgnoreError();
}

}  // namespace granary
