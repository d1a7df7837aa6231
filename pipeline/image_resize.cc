#include "pipeline/image_resize.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/limits.h"

namespace granary {
namespace {

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

}  // namespace

absl::StatusOr<Tensor> ResizeImage(Tensor image, int64_t height, int64_t width,
                                   absl::string_view who) {
  const int64_t h = image.shape()[0];
  const int64_t w = image.shape()[1];
  const int64_t c = image.shape()[2];
  if (h == height && w == width) return image;
  if (h == 0 || w == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": cannot resize the empty image ", image.DebugString()));
  }
  const int64_t out_bytes = height * width * c * DtypeSize(image.dtype());
  if (out_bytes > kMaxElementBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        who, ": resizing ", image.DebugString(), " to ", DataTypeName(image.dtype()), "[", height,
        ",", width, ",", c, "] would make ", HumanBytes(out_bytes), ", above the limit of ",
        HumanBytes(kMaxElementBytes), " per element (kMaxElementBytes, pipeline/limits.h)"));
  }
  Tensor out = Tensor::Uninitialized(image.dtype(), {height, width, c});
  if (image.dtype() == DT_UINT8) {
    ResizeBilinear(image.data<uint8_t>(), h, w, c, out.data<uint8_t>(), height, width);
  } else {
    ResizeBilinear(image.data<float>(), h, w, c, out.data<float>(), height, width);
  }
  return out;
}

}  // namespace granary
