#include "pipeline/image/image_resize.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline/core/limits.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

// The row's values as floats. SSE2: 16 bytes widened at a time (exact, as the scalar cast).
template <typename T>
void ToFloats(const T* src, int64_t n, float* dst) {
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, uint8_t>) {
    const __m128i zero = _mm_setzero_si128();
    for (; i + 16 <= n; i += 16) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      const __m128i low = _mm_unpacklo_epi8(bytes, zero);
      const __m128i high = _mm_unpackhi_epi8(bytes, zero);
      _mm_storeu_ps(dst + i, _mm_cvtepi32_ps(_mm_unpacklo_epi16(low, zero)));
      _mm_storeu_ps(dst + i + 4, _mm_cvtepi32_ps(_mm_unpackhi_epi16(low, zero)));
      _mm_storeu_ps(dst + i + 8, _mm_cvtepi32_ps(_mm_unpacklo_epi16(high, zero)));
      _mm_storeu_ps(dst + i + 12, _mm_cvtepi32_ps(_mm_unpackhi_epi16(high, zero)));
    }
  }
#endif
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

// One source row interpolated horizontally into `dst` (out_w * channels floats): for output
// column x, a + (b - a) * w of its two taps. Per value these are the float operations, in the
// order, of the direct form p00 + (p01 - p00) * wx, p10 + (p11 - p10) * wx, then
// top + (bottom - top) * wy, so resizing in two passes gives the direct form's bytes (a test
// holds it to them; SSE2 computes the same IEEE operations four lanes at a time). kChannels > 0
// fixes the channel count at compile time. `scratch` holds in_values + 4 floats, `dst`
// out_values + 4 (the SSE2 path reads and writes up to 3 floats past a pixel).
template <int kChannels, typename T>
void InterpolateRow(const T* src, int64_t channels, int64_t in_values, const std::vector<Tap>& xs,
                    float* scratch, float* dst) {
  const int64_t c_count = kChannels > 0 ? kChannels : channels;
  ToFloats(src, in_values, scratch);
#if defined(__SSE2__)
  if constexpr (kChannels == 3 || kChannels == 4) {
    for (const Tap& x : xs) {
      const __m128 a = _mm_loadu_ps(scratch + x.i0);
      const __m128 b = _mm_loadu_ps(scratch + x.i1);
      _mm_storeu_ps(dst, _mm_add_ps(a, _mm_mul_ps(_mm_sub_ps(b, a), _mm_set1_ps(x.w))));
      dst += kChannels;
    }
    return;
  }
#endif
  for (const Tap& x : xs) {
    const float* a = scratch + x.i0;
    const float* b = scratch + x.i1;
    for (int64_t c = 0; c < c_count; ++c) dst[c] = a[c] + (b[c] - a[c]) * x.w;
    dst += c_count;
  }
}

// An output row: top + (bottom - top) * wy per value, stored as T (Store). SSE2 for uint8:
// 16 values at a time, rounded and clamped as Store does, truncated to integers as its cast.
template <typename T>
void InterpolateColumn(const float* top, const float* bottom, float wy, int64_t n, T* dst) {
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, uint8_t>) {
    const __m128 w = _mm_set1_ps(wy);
    const __m128 half = _mm_set1_ps(0.5f);
    const __m128 lo = _mm_setzero_ps();
    const __m128 hi = _mm_set1_ps(255.0f);
    const auto lane = [&](int64_t k) {
      const __m128 t = _mm_loadu_ps(top + k);
      const __m128 v = _mm_add_ps(t, _mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(bottom + k), t), w));
      return _mm_cvttps_epi32(_mm_min_ps(_mm_max_ps(_mm_add_ps(v, half), lo), hi));
    };
    for (; i + 16 <= n; i += 16) {
      const __m128i low = _mm_packs_epi32(lane(i), lane(i + 4));
      const __m128i high = _mm_packs_epi32(lane(i + 8), lane(i + 12));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_packus_epi16(low, high));
    }
  }
#endif
  for (; i < n; ++i) Store(top[i] + (bottom[i] - top[i]) * wy, dst + i);
}

// Two passes: each source row a output row needs is interpolated horizontally once (output
// rows share them), then each output row is the vertical interpolation of two such rows.
template <int kChannels, typename T>
void ResizeBilinear(const T* in, int64_t in_h, int64_t in_w, int64_t channels, T* out,
                    int64_t out_h, int64_t out_w) {
  const int64_t c_count = kChannels > 0 ? kChannels : channels;
  const std::vector<Tap> ys = ComputeTaps(in_h, out_h);
  std::vector<Tap> xs = ComputeTaps(in_w, out_w);
  for (Tap& x : xs) {  // Column taps as value offsets within a row.
    x.i0 *= c_count;
    x.i1 *= c_count;
  }
  const int64_t in_values = in_w * c_count;
  const int64_t out_values = out_w * c_count;
  const int64_t row_floats = out_values + 4;
  std::vector<float> buffer(2 * row_floats + in_values + 4);
  float* rows[2] = {buffer.data(), buffer.data() + row_floats};  // Source rows i0 and i1.
  float* scratch = buffer.data() + 2 * row_floats;
  int64_t held[2] = {-1, -1};  // Which source row rows[k] holds.
  const auto fill = [&](int k, int64_t row) {
    InterpolateRow<kChannels>(in + row * in_values, c_count, in_values, xs, scratch, rows[k]);
    held[k] = row;
  };
  for (int64_t y = 0; y < out_h; ++y) {
    const Tap& ty = ys[y];
    if (held[0] != ty.i0) {
      if (held[1] == ty.i0) {  // The last output row's lower source row is this one's upper.
        std::swap(rows[0], rows[1]);
        std::swap(held[0], held[1]);
      } else {
        fill(0, ty.i0);
      }
    }
    if (held[1] != ty.i1) fill(1, ty.i1);
    InterpolateColumn(rows[0], rows[1], ty.w, out_values, out + y * out_values);
  }
}

template <typename T>
void ResizeBilinear(const T* in, int64_t in_h, int64_t in_w, int64_t channels, T* out,
                    int64_t out_h, int64_t out_w) {
  switch (channels) {
    case 1:
      return ResizeBilinear<1>(in, in_h, in_w, channels, out, out_h, out_w);
    case 3:
      return ResizeBilinear<3>(in, in_h, in_w, channels, out, out_h, out_w);
    case 4:
      return ResizeBilinear<4>(in, in_h, in_w, channels, out, out_h, out_w);
    default:
      return ResizeBilinear<0>(in, in_h, in_w, channels, out, out_h, out_w);
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
        HumanBytes(kMaxElementBytes), " per element (kMaxElementBytes, pipeline/core/limits.h)"));
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
