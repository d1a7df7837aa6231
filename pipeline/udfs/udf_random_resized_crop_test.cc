// Tests of the random_resized_crop UDF (udf_random_resized_crop.cc).
#include <cmath>
#include <set>
#include <string>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/image/image_crop.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary::udf_test {
namespace {

using ::testing::HasSubstr;

constexpr RegisteredUdf kRandomResizedCrop = {RegisterRandomResizedCropUdf, "random_resized_crop"};

// The windows the UDF built from `params` chooses on an image of `height` x `width`.
CropWindow WindowFor(const std::string& params, int64_t height, int64_t width, uint64_t key) {
  absl::StatusOr<std::unique_ptr<Udf>> udf = MakeUdf(kRandomResizedCrop, params);
  EXPECT_TRUE(udf.ok()) << udf.status();
  if (!udf.ok()) return {};
  const auto* crop = dynamic_cast<const CropUdf*>(udf->get());
  EXPECT_NE(crop, nullptr);
  absl::StatusOr<CropWindow> window = crop->Window(height, width, UdfCall{key});
  EXPECT_TRUE(window.ok()) << window.status();
  return window.ok() ? *window : CropWindow{};
}

TEST(RandomResizedCropUdfTest, MakesTheOutputSizeFromUint8AndFloatImages) {
  EXPECT_EQ(
      ApplyUdf(kRandomResizedCrop, R"({"height": 24, "width": 32})", PatternImage(100, 80, 3), 5)
          .DebugString(),
      "uint8[24,32,3]");
  Tensor image(DT_FLOAT, {50, 60, 2});
  EXPECT_EQ(ApplyUdf(kRandomResizedCrop, R"({"height": 7, "width": 9})", image, 5).DebugString(),
            "float32[7,9,2]");
}

TEST(RandomResizedCropUdfTest, WindowsKeepToTheScaleAndRatioRanges) {
  // Over many keys: every window lies inside the image, its area is within scale of the
  // image's and its aspect ratio within ratio (up to the rounding of its sides to pixels).
  const int64_t h = 300, w = 400;
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> distinct;
  for (uint64_t key = 0; key < 1000; ++key) {
    const CropWindow win = WindowFor(R"({"height": 8, "width": 8, "scale": [0.25, 0.75],
                                         "ratio": [0.5, 2.0]})",
                                     h, w, key);
    ASSERT_GE(win.y, 0) << "key " << key;
    ASSERT_GE(win.x, 0) << "key " << key;
    ASSERT_LE(win.y + win.height, h) << "key " << key;
    ASSERT_LE(win.x + win.width, w) << "key " << key;
    const double area = static_cast<double>(win.height * win.width) / (h * w);
    EXPECT_GE(area, 0.25 * 0.98) << "key " << key;
    EXPECT_LE(area, 0.75 * 1.02) << "key " << key;
    const double ratio = static_cast<double>(win.width) / win.height;
    EXPECT_GE(ratio, 0.5 * 0.98) << "key " << key;
    EXPECT_LE(ratio, 2.0 * 1.02) << "key " << key;
    distinct.emplace(win.y, win.x, win.height, win.width);
  }
  EXPECT_GT(distinct.size(), 900u) << "the windows should hardly ever repeat";
}

TEST(RandomResizedCropUdfTest, FallsBackToTheCentralCropClampedToTheRatio) {
  // A whole-area window of ratio 2 never fits a square image: ten attempts fail, and the
  // central crop of ratio 2 (100 wide, round(100 / 2) = 50 high) is taken.
  const CropWindow win =
      WindowFor(R"({"height": 8, "width": 8, "scale": [1, 1], "ratio": [2, 2]})", 100, 100, 3);
  EXPECT_EQ(win.y, 25);
  EXPECT_EQ(win.x, 0);
  EXPECT_EQ(win.height, 50);
  EXPECT_EQ(win.width, 100);
  // Within the ratio range, the whole image.
  const CropWindow whole =
      WindowFor(R"({"height": 8, "width": 8, "scale": [1, 1], "ratio": [0.5, 0.5]})", 40, 20, 3);
  EXPECT_EQ(whole.height, 40);
  EXPECT_EQ(whole.width, 20);
}

TEST(RandomResizedCropUdfTest, SameKeyGivesIdenticalBytesAndKeysDiffer) {
  const Tensor image = PatternImage(64, 48, 3);
  const std::string params = R"({"height": 16, "width": 16})";
  EXPECT_TRUE(ApplyUdf(kRandomResizedCrop, params, image, 77) ==
              ApplyUdf(kRandomResizedCrop, params, image, 77));
  EXPECT_FALSE(ApplyUdf(kRandomResizedCrop, params, image, 77) ==
               ApplyUdf(kRandomResizedCrop, params, image, 78));
}

TEST(RandomResizedCropUdfTest, BadParamsAreErrorsNamingTheParam) {
  const Element element = MakeElement({PatternImage(8, 8, 3)});
  EXPECT_THAT(UdfError(kRandomResizedCrop, R"({"height": 8})", element).message(),
              HasSubstr("width"));
  EXPECT_THAT(UdfError(kRandomResizedCrop, R"({"height": 8, "width": 8, "scale": [0.5]})", element)
                  .message(),
              HasSubstr("'scale' must be [min, max], got 1 values"));
  EXPECT_THAT(
      UdfError(kRandomResizedCrop, R"({"height": 8, "width": 8, "scale": [0.5, 2]})", element)
          .message(),
      HasSubstr("max must be at most 1"));
  EXPECT_THAT(UdfError(kRandomResizedCrop, R"({"height": 8, "width": 8, "ratio": [2, 1]})", element)
                  .message(),
              HasSubstr("0 < min <= max"));
  EXPECT_THAT(UdfError(kRandomResizedCrop, R"({"height": 0, "width": 8})", element).message(),
              HasSubstr("must be positive"));
}

TEST(RandomResizedCropUdfTest, AnEmptyImageIsAnError) {
  EXPECT_THAT(UdfError(kRandomResizedCrop, R"({"height": 8, "width": 8})",
                       MakeElement({Tensor(DT_UINT8, {0, 5, 3})}))
                  .message(),
              HasSubstr("cannot crop the empty image 0x5"));
}

}  // namespace
}  // namespace granary::udf_test
