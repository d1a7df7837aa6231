// normalize: replaces the image at `index` (uint8 or float32 [height, width, channels]) by the
// float32 image (x * scale - mean[c]) / std[c]. params: index (default 0), scale (default
// 1/255), mean and std (number lists, each with one value for all channels or one per channel;
// default [0] and [1]). std entries must be non-zero.
//
// The formula is evaluated in float32 exactly as written (this file is compiled without
// floating-point contraction: no fused multiply-subtract), for uint8 four values at a time with
// SSE2 where the channels divide 12, else through a per-channel table of all 256 results — the
// same operations in the same order, so a uint8 image and the same image cast to float32
// normalize to identical bytes. An output made in its batch (pipeline/core/row_destination.h) is
// written with streaming stores: it is read next by the trainer, not by this core.
#include <algorithm>
#include <cstdint>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "pipeline/spec/udf_declarations.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/core/row_destination.h"
#include "pipeline/core/udf_tensor_access.h"

namespace granary {
namespace {

constexpr char kName[] = "normalize";
// Values per vector step: a multiple of every channel count the vector path serves (1, 2, 3, 4,
// 6), so each step's per-lane means and stds are the same.
constexpr int kStep = 12;

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
    vector_path_ = kStep % tables == 0;
    for (int j = 0; j < kStep; ++j) {
      step_mean_[j] = Mean(j % tables);
      step_std_[j] = Std(j % tables);
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
      float* const to = out.data<float>();
      NormalizeUint8(t->data<uint8_t>(), pixels, channels, to,
                     ScopedRowDestinations::IsClaimedDestination(to));
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

  // `stream`: write `out` with streaming stores.
  void NormalizeUint8(const uint8_t* in, int64_t pixels, int64_t channels, float* out,
                      bool stream) const {
#if defined(__SSE2__)
    if (vector_path_) {
      const int64_t n = pixels * channels;
      const int64_t done = NormalizeUint8Vector(in, n, out, stream);
      // The rest (fewer than 16 values) by table; `done` is a multiple of every channel count.
      const size_t tables = lut_.size() / 256;
      for (int64_t i = done; i < n; ++i) out[i] = Table(i % tables)[in[i]];
      return;
    }
#endif
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

#if defined(__SSE2__)
  // Normalizes in[0..k) into out[0..k), k a multiple of kStep: every step while its 16-byte load
  // stays within in[0..n). Returns k.
  int64_t NormalizeUint8Vector(const uint8_t* in, int64_t n, float* out, bool stream) const {
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
  }
#endif

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
  // The vector path: whether the lists' length divides kStep, and each lane's mean and std.
  bool vector_path_ = false;
  float step_mean_[kStep];
  float step_std_[kStep];
};

}  // namespace

void RegisterNormalizeUdf(UdfRegistry* registry) {
  UdfInfo info = NormalizeUdfDeclaration();
  info.factory = [](const Params& p) -> absl::StatusOr<std::unique_ptr<Udf>> {
    ASSIGN_OR_RETURN(NormalizeConfig config, ReadNormalizeConfig(p));
    return std::make_unique<Normalize>(config.index, config.scale, std::move(config.mean),
                                       std::move(config.std));
  };
  registry->Register(std::move(info)).IgnoreError();
}

}  // namespace granary
