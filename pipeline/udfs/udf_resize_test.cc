// Tests of the resize UDF (udf_resize.cc).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary::udf_test {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr RegisteredUdf kResize = {RegisterResizeUdf, "resize"};

// `image` resized to `height` x `width`; fails the test on error.
Tensor Resize(int64_t height, int64_t width, const Tensor& image) {
  return ApplyUdf(
      kResize,
      "{\"height\": " + std::to_string(height) + ", \"width\": " + std::to_string(width) + "}",
      image);
}

TEST(ResizeUdfTest, UpscalesFloat2x2To4x4) {
  const Tensor image = Tensor::FromVector<float>({2, 2, 1}, {0, 10, 20, 30});
  const Tensor out = Resize(4, 4, image);
  EXPECT_EQ(out.DebugString(), "float32[4,4,1]");
  // Half-pixel centers: columns sample at 0, 0.25, 0.75, 1 (clamped), and rows likewise.
  EXPECT_THAT(Values<float>(out), ElementsAreArray<float>({0, 2.5, 7.5, 10,     //
                                                           5, 7.5, 12.5, 15,    //
                                                           15, 17.5, 22.5, 25,  //
                                                           20, 22.5, 27.5, 30}));
}

TEST(ResizeUdfTest, UpscalesUint8WithRounding) {
  const Tensor image = Tensor::FromVector<uint8_t>({2, 2, 1}, {0, 10, 20, 30});
  const Tensor out = Resize(4, 4, image);
  EXPECT_EQ(out.DebugString(), "uint8[4,4,1]");
  EXPECT_THAT(Values<uint8_t>(out), ElementsAreArray<uint8_t>({0, 3, 8, 10,     //
                                                               5, 8, 13, 15,    //
                                                               15, 18, 23, 25,  //
                                                               20, 23, 28, 30}));
}

TEST(ResizeUdfTest, UpscalingPreservesCorners) {
  const Tensor image = PatternImage(3, 5, 3);
  const Tensor out = Resize(12, 17, image);
  EXPECT_EQ(out.DebugString(), "uint8[12,17,3]");
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(At(out, 0, 0, c), At(image, 0, 0, c));
    EXPECT_EQ(At(out, 0, 16, c), At(image, 0, 4, c));
    EXPECT_EQ(At(out, 11, 0, c), At(image, 2, 0, c));
    EXPECT_EQ(At(out, 11, 16, c), At(image, 2, 4, c));
  }
}

TEST(ResizeUdfTest, DownscalesByAveragingNeighbours) {
  std::vector<float> values(16);
  for (int i = 0; i < 16; ++i) values[i] = i;
  const Tensor out = Resize(2, 2, Tensor::FromVector<float>({4, 4, 1}, values));
  EXPECT_THAT(Values<float>(out), ElementsAre(2.5, 4.5, 10.5, 12.5));
}

TEST(ResizeUdfTest, ChannelsAreIndependent) {
  // Channel c holds 100 * c + the 2x2 pattern.
  Tensor image(DT_FLOAT, {2, 2, 3});
  for (int p = 0; p < 4; ++p) {
    for (int c = 0; c < 3; ++c) image.data<float>()[p * 3 + c] = 100 * c + 10 * p;
  }
  const Tensor out = Resize(4, 4, image);
  for (int64_t y = 0; y < 4; ++y) {
    for (int64_t x = 0; x < 4; ++x) {
      EXPECT_FLOAT_EQ(At(out, y, x, 1), At(out, y, x, 0) + 100);
      EXPECT_FLOAT_EQ(At(out, y, x, 2), At(out, y, x, 0) + 200);
    }
  }
}

TEST(ResizeUdfTest, ConstantImageStaysConstant) {
  Tensor image(DT_UINT8, {7, 9, 3});
  for (int64_t i = 0; i < image.num_elements(); ++i) image.data<uint8_t>()[i] = 200;
  for (const Tensor& out : {Resize(13, 4, image), Resize(3, 20, image)}) {
    for (int64_t i = 0; i < out.num_elements(); ++i) ASSERT_EQ(out.data<uint8_t>()[i], 200);
  }
}

TEST(ResizeUdfTest, SameSizeIsTheIdentity) {
  const Tensor image = PatternImage(6, 5, 3);
  EXPECT_TRUE(Resize(6, 5, image) == image);
}

TEST(ResizeUdfTest, IndexOutOfRangeIsAnError) {
  absl::StatusOr<std::unique_ptr<Udf>> udf =
      MakeUdf(kResize, R"({"index": 3, "height": 2, "width": 2})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({PatternImage(4, 4, 3)});
  absl::Status status = (*udf)->Map(element, UdfCall{});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("resize: "));
  EXPECT_THAT(status.message(), HasSubstr("index 3 is out of range"));
  EXPECT_THAT(status.message(), HasSubstr("1 tensors"));
}

TEST(ResizeUdfTest, WrongDtypeIsAnError) {
  absl::StatusOr<std::unique_ptr<Udf>> udf = MakeUdf(kResize, R"({"height": 2, "width": 2})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({Tensor(DT_DOUBLE, {4, 4, 3})});
  EXPECT_THAT((*udf)->Map(element, UdfCall{}).message(),
              HasSubstr("resize: tensor 0 is float64[4,4,3], need uint8 or float32"));
}

TEST(ResizeUdfTest, WrongRankIsAnError) {
  absl::StatusOr<std::unique_ptr<Udf>> udf = MakeUdf(kResize, R"({"height": 2, "width": 2})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({Tensor(DT_UINT8, {16})});
  EXPECT_THAT((*udf)->Map(element, UdfCall{}).message(),
              HasSubstr("resize: tensor 0 is uint8[16], need an image"));
}

TEST(ResizeUdfTest, EmptyImageIsAnError) {
  absl::StatusOr<std::unique_ptr<Udf>> udf = MakeUdf(kResize, R"({"height": 2, "width": 2})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({Tensor(DT_UINT8, {0, 4, 3})});
  EXPECT_THAT((*udf)->Map(element, UdfCall{}).message(),
              HasSubstr("resize: cannot resize the empty image uint8[0,4,3]"));
}

TEST(ResizeUdfTest, FactoryRequiresHeightAndWidth) {
  EXPECT_THAT(MakeUdf(kResize, R"({"height": 2})").status().message(),
              HasSubstr("missing required param 'width'"));
}

TEST(ResizeUdfTest, FactoryRejectsNonPositiveSize) {
  EXPECT_THAT(MakeUdf(kResize, R"({"height": 0, "width": 2})").status().message(),
              HasSubstr("param 'height' must be positive, got 0"));
  EXPECT_THAT(MakeUdf(kResize, R"({"height": 2, "width": -1})").status().message(),
              HasSubstr("param 'width' must be positive, got -1"));
}

}  // namespace
}  // namespace granary::udf_test
