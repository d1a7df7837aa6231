// Tests of ResizeImage (image_resize.h): the two-pass implementation gives, byte for byte, what
// the direct per-pixel form of its contract gives (the reference below), on random images of
// every channel count, both dtypes and sizes up and down (seed in the failure messages).
#include "pipeline/image/image_resize.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

// The contract, directly: output pixel (y, x) samples the input at (y + 0.5) * in_h / out_h - 0.5
// and likewise for x, clamped; top = p00 + (p01 - p00) * wx, bottom likewise, then
// top + (bottom - top) * wy, uint8 rounded to nearest and clamped.
template <typename T>
Tensor ReferenceResize(const Tensor& image, int64_t out_h, int64_t out_w) {
  const int64_t in_h = image.shape()[0], in_w = image.shape()[1], c = image.shape()[2];
  const auto tap = [](int64_t i, int64_t in, int64_t out, int64_t* i0, int64_t* i1, float* w) {
    float src =
        (static_cast<float>(i) + 0.5f) * (static_cast<float>(in) / static_cast<float>(out)) - 0.5f;
    src = std::min(std::max(src, 0.0f), static_cast<float>(in - 1));
    *i0 = static_cast<int64_t>(src);
    *i1 = std::min(*i0 + 1, in - 1);
    *w = src - static_cast<float>(*i0);
  };
  Tensor out(image.dtype(), {out_h, out_w, c});
  const T* in = image.data<T>();
  T* dst = out.data<T>();
  for (int64_t y = 0; y < out_h; ++y) {
    int64_t y0, y1;
    float wy;
    tap(y, in_h, out_h, &y0, &y1, &wy);
    for (int64_t x = 0; x < out_w; ++x) {
      int64_t x0, x1;
      float wx;
      tap(x, in_w, out_w, &x0, &x1, &wx);
      for (int64_t ch = 0; ch < c; ++ch) {
        const auto at = [&](int64_t yy, int64_t xx) {
          return static_cast<float>(in[(yy * in_w + xx) * c + ch]);
        };
        const float top = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * wx;
        const float bottom = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * wx;
        const float v = top + (bottom - top) * wy;
        if constexpr (std::is_same_v<T, uint8_t>) {
          *dst++ = static_cast<uint8_t>(std::min(std::max(v + 0.5f, 0.0f), 255.0f));
        } else {
          *dst++ = v;
        }
      }
    }
  }
  return out;
}

TEST(ImageResizeTest, TwoPassesGiveTheDirectFormsBytes) {
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 200; ++i) {
    const auto side = [&] { return std::uniform_int_distribution<int64_t>(1, 90)(rng); };
    const int64_t in_h = side(), in_w = side(), out_h = side(), out_w = side();
    const int64_t c = std::uniform_int_distribution<int64_t>(1, 5)(rng);
    const bool as_float = i % 4 == 3;
    Tensor image(as_float ? DT_FLOAT : DT_UINT8, {in_h, in_w, c});
    for (int64_t k = 0; k < image.num_elements(); ++k) {
      if (as_float) {
        image.data<float>()[k] = std::uniform_real_distribution<float>(-3, 3)(rng);
      } else {
        image.data<uint8_t>()[k] = static_cast<uint8_t>(rng());
      }
    }
    const std::string what = "seed " + std::to_string(seed) + " case " + std::to_string(i) + ": " +
                             image.DebugString() + " to " + std::to_string(out_h) + "x" +
                             std::to_string(out_w);
    absl::StatusOr<Tensor> resized = ResizeImage(image, out_h, out_w, "test");
    ASSERT_TRUE(resized.ok()) << what << ": " << resized.status();
    const Tensor expected = as_float ? ReferenceResize<float>(image, out_h, out_w)
                                     : ReferenceResize<uint8_t>(image, out_h, out_w);
    ASSERT_TRUE(*resized == expected) << what;
  }
}

TEST(ImageResizeTest, ErrorsNameTheCaller) {
  EXPECT_THAT(ResizeImage(Tensor(DT_UINT8, {0, 4, 3}), 2, 2, "resize").status().message(),
              ::testing::HasSubstr("resize: cannot resize the empty image"));
}

}  // namespace
}  // namespace granary
