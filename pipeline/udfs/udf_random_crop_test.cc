// Tests of the random_crop UDF (udf_random_crop.cc).
#include <set>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary::udf_test {
namespace {

using ::testing::HasSubstr;

constexpr RegisteredUdf kRandomCrop = {RegisterRandomCropUdf, "random_crop"};

// The (row, column) offset at which `crop` is a window of `image`; (-1, -1) if it is none.
std::pair<int64_t, int64_t> FindWindow(const Tensor& image, const Tensor& crop) {
  const int64_t ch = crop.shape()[0], cw = crop.shape()[1], c = crop.shape()[2];
  for (int64_t y = 0; y + ch <= image.shape()[0]; ++y) {
    for (int64_t x = 0; x + cw <= image.shape()[1]; ++x) {
      bool match = true;
      for (int64_t i = 0; i < ch && match; ++i) {
        for (int64_t j = 0; j < cw && match; ++j) {
          for (int64_t k = 0; k < c && match; ++k) {
            match = At(crop, i, j, k) == At(image, y + i, x + j, k);
          }
        }
      }
      if (match) return {y, x};
    }
  }
  return {-1, -1};
}

TEST(RandomCropUdfTest, CropsAWindowOfTheRequestedSize) {
  const Tensor image = PatternImage(10, 12, 3);
  const Tensor crop = ApplyUdf(kRandomCrop, R"({"height": 4, "width": 5})", image, 42);
  EXPECT_EQ(crop.DebugString(), "uint8[4,5,3]");
  const auto [y, x] = FindWindow(image, crop);
  EXPECT_GE(y, 0);
  EXPECT_GE(x, 0);
}

TEST(RandomCropUdfTest, CropsFloatImages) {
  Tensor image(DT_FLOAT, {6, 7, 2});
  for (int64_t i = 0; i < image.num_elements(); ++i) image.data<float>()[i] = 0.5f * i;
  const Tensor crop = ApplyUdf(kRandomCrop, R"({"height": 3, "width": 3})", image, 7);
  EXPECT_EQ(crop.DebugString(), "float32[3,3,2]");
  EXPECT_GE(FindWindow(image, crop).first, 0);
}

TEST(RandomCropUdfTest, SameKeyGivesIdenticalBytes) {
  const Tensor image = PatternImage(64, 64, 3);
  for (uint64_t key : {0ull, 1ull, 123456789ull}) {
    EXPECT_TRUE(ApplyUdf(kRandomCrop, R"({"height": 56, "width": 56})", image, key) ==
                ApplyUdf(kRandomCrop, R"({"height": 56, "width": 56})", image, key));
  }
}

TEST(RandomCropUdfTest, DifferentKeysGiveDifferentCropsCoveringEveryOffset) {
  const Tensor image = PatternImage(6, 6, 1);
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (uint64_t key = 0; key < 300; ++key) {
    const Tensor crop = ApplyUdf(kRandomCrop, R"({"height": 4, "width": 4})", image, key);
    const auto offset = FindWindow(image, crop);
    ASSERT_GE(offset.first, 0);
    offsets.insert(offset);
  }
  EXPECT_EQ(offsets.size(), 9u);  // Every one of the 3 x 3 positions.
}

TEST(RandomCropUdfTest, FractionCropsEachSide) {
  EXPECT_EQ(ApplyUdf(kRandomCrop, R"({"fraction": 0.5})", PatternImage(64, 48, 3), 1).DebugString(),
            "uint8[32,24,3]");
  EXPECT_EQ(
      ApplyUdf(kRandomCrop, R"({"fraction": 0.875})", PatternImage(224, 224, 3), 1).DebugString(),
      "uint8[196,196,3]");
  EXPECT_EQ(
      ApplyUdf(kRandomCrop, R"({"fraction": 0.01})", PatternImage(10, 10, 1), 1).DebugString(),
      "uint8[1,1,1]");
}

TEST(RandomCropUdfTest, FullSizeCropIsTheIdentity) {
  const Tensor image = PatternImage(5, 5, 3);
  EXPECT_TRUE(ApplyUdf(kRandomCrop, R"({"height": 5, "width": 5})", image, 9) == image);
  EXPECT_TRUE(ApplyUdf(kRandomCrop, R"({"fraction": 1})", image, 9) == image);
}

TEST(RandomCropUdfTest, CropsTheTensorAtIndex) {
  absl::StatusOr<std::unique_ptr<Udf>> udf =
      MakeUdf(kRandomCrop, R"({"index": 1, "height": 2, "width": 2})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({Tensor::Scalar<int64_t>(5), PatternImage(4, 4, 3)});
  ASSERT_TRUE((*udf)->Map(element, UdfCall{}).ok());
  EXPECT_EQ(element.tensors[0].data<int64_t>()[0], 5);
  EXPECT_EQ(element.tensors[1].DebugString(), "uint8[2,2,3]");
}

TEST(RandomCropUdfTest, ImageSmallerThanTheCropIsAnError) {
  absl::Status status = UdfError(kRandomCrop, R"({"height": 56, "width": 56})",
                                 MakeElement({PatternImage(32, 32, 3)}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("random_crop: image 32x32 is smaller than the crop 56x56"));
}

TEST(RandomCropUdfTest, ImageNarrowerThanTheCropIsAnError) {
  EXPECT_THAT(
      UdfError(kRandomCrop, R"({"height": 4, "width": 8})", MakeElement({PatternImage(10, 6, 1)}))
          .message(),
      HasSubstr("random_crop: image 10x6 is smaller than the crop 4x8 (height x width)"));
}

TEST(RandomCropUdfTest, IndexOutOfRangeIsAnError) {
  absl::Status status = UdfError(kRandomCrop, R"({"index": 2, "height": 1, "width": 1})",
                                 MakeElement({PatternImage(4, 4, 3), PatternImage(4, 4, 3)}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("random_crop: "));
  EXPECT_THAT(status.message(), HasSubstr("index 2 is out of range"));
  EXPECT_THAT(status.message(), HasSubstr("2 tensors"));
}

TEST(RandomCropUdfTest, WrongDtypeIsAnError) {
  absl::Status status = UdfError(kRandomCrop, R"({"height": 1, "width": 1})",
                                 MakeElement({Tensor(DT_INT64, {4, 4, 3})}));
  EXPECT_THAT(status.message(),
              HasSubstr("random_crop: tensor 0 is int64[4,4,3], need uint8 or float32"));
}

TEST(RandomCropUdfTest, WrongRankIsAnError) {
  absl::Status status = UdfError(kRandomCrop, R"({"height": 1, "width": 1})",
                                 MakeElement({Tensor(DT_UINT8, {4, 4})}));
  EXPECT_THAT(status.message(), HasSubstr("random_crop: tensor 0 is uint8[4,4], need an image"));
}

TEST(RandomCropUdfTest, FactoryRejectsBothSizeAndFraction) {
  EXPECT_THAT(
      MakeUdf(kRandomCrop, R"({"height": 4, "width": 4, "fraction": 0.5})").status().message(),
      HasSubstr("param 'fraction' cannot be combined with height/width"));
}

TEST(RandomCropUdfTest, FactoryRejectsNeitherSizeNorFraction) {
  absl::StatusOr<std::unique_ptr<Udf>> udf = MakeUdf(kRandomCrop, "{}");
  EXPECT_EQ(udf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(udf.status().message(),
              HasSubstr("give either params height and width, or param fraction"));
}

TEST(RandomCropUdfTest, FactoryRejectsHeightWithoutWidth) {
  EXPECT_THAT(MakeUdf(kRandomCrop, R"({"height": 4})").status().message(),
              HasSubstr("param 'width' is missing: height needs width"));
  EXPECT_THAT(MakeUdf(kRandomCrop, R"({"width": 4})").status().message(),
              HasSubstr("param 'height' is missing: width needs height"));
}

TEST(RandomCropUdfTest, FactoryRejectsNonPositiveSize) {
  EXPECT_THAT(MakeUdf(kRandomCrop, R"({"height": 0, "width": 4})").status().message(),
              HasSubstr("param 'height' must be positive, got 0"));
  EXPECT_THAT(MakeUdf(kRandomCrop, R"({"height": 4, "width": -2})").status().message(),
              HasSubstr("param 'width' must be positive, got -2"));
}

TEST(RandomCropUdfTest, FactoryRejectsFractionOutOfRange) {
  EXPECT_THAT(MakeUdf(kRandomCrop, R"({"fraction": 0})").status().message(),
              HasSubstr("param 'fraction' must be in (0, 1], got 0"));
  EXPECT_THAT(MakeUdf(kRandomCrop, R"({"fraction": 1.5})").status().message(),
              HasSubstr("param 'fraction' must be in (0, 1], got 1.5"));
}

TEST(RandomCropUdfTest, FactoryRejectsNegativeIndex) {
  EXPECT_THAT(MakeUdf(kRandomCrop, R"({"index": -1, "fraction": 0.5})").status().message(),
              HasSubstr("param 'index' must be >= 0, got -1"));
}

}  // namespace
}  // namespace granary::udf_test
