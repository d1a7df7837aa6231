#include "pipeline/kernels/normalize_kernel.h"

#include <algorithm>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace granary {

NormalizeKernel::NormalizeKernel(float scale, std::vector<float> mean, std::vector<float> std)
    : scale_(scale), mean_(std::move(mean)), std_(std::move(std)) {
  // Tables for uint8 input: one per entry of the longer list (one when both have one).
  const size_t tables = std::max(mean_.size(), std_.size());
  lut_.resize(tables * 256);
  for (size_t c = 0; c < tables; ++c) {
    for (int v = 0; v < 256; ++v) lut_[c * 256 + v] = Apply(static_cast<float>(v), c);
  }
  vector_path_ = kStep % tables == 0;
  for (int j = 0; j < kStep; ++j) {
    step_mean_[j] = Mean(j % tables);
    step_std_[j] = Std(j % tables);
  }
}

void NormalizeKernel::FromUint8(const uint8_t* in, int64_t pixels, int64_t channels, float* out,
                                bool stream) const {
  if (vector_path_) {
    const int64_t n = pixels * channels;
    const int64_t done = FromUint8Vector(in, n, out, stream);
    // The rest (fewer than 16 values) by table; `done` is a multiple of every channel count.
    const size_t tables = lut_.size() / 256;
    for (int64_t i = done; i < n; ++i) out[i] = Table(i % tables)[in[i]];
    return;
  }
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

int64_t NormalizeKernel::FromUint8Vector(const uint8_t* in, int64_t n, float* out,
                                         bool stream) const {
#if defined(__SSE2__)
  const __m128 scale = _mm_set1_ps(scale_);
  const __m128 mean[3] = {_mm_loadu_ps(step_mean_), _mm_loadu_ps(step_mean_ + 4),
                          _mm_loadu_ps(step_mean_ + 8)};
  const __m128 std[3] = {_mm_loadu_ps(step_std_), _mm_loadu_ps(step_std_ + 4),
                         _mm_loadu_ps(step_std_ + 8)};
  const __m128i zero = _mm_setzero_si128();
  stream = stream && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += kStep) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m128i low = _mm_unpacklo_epi8(bytes, zero);
    const __m128i high = _mm_unpackhi_epi8(bytes, zero);
    const __m128i words[3] = {_mm_unpacklo_epi16(low, zero), _mm_unpackhi_epi16(low, zero),
                              _mm_unpacklo_epi16(high, zero)};
    for (int k = 0; k < 3; ++k) {
      const __m128 x = _mm_cvtepi32_ps(words[k]);
      const __m128 y = _mm_div_ps(_mm_sub_ps(_mm_mul_ps(x, scale), mean[k]), std[k]);
      if (stream) {
        _mm_stream_ps(out + i + 4 * k, y);
      } else {
        _mm_storeu_ps(out + i + 4 * k, y);
      }
    }
  }
  if (stream) _mm_sfence();
  return i;
#else
  (void)in;
  (void)n;
  (void)out;
  (void)stream;
  return 0;
#endif
}

void NormalizeKernel::InPlace(float* x, int64_t pixels, int64_t channels) const {
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

}  // namespace granary
