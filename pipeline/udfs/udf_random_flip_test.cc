// Tests of the random_flip UDF (udf_random_flip.cc).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary::udf_test {
namespace {

using ::testing::HasSubstr;

constexpr RegisteredUdf kRandomFlip = {RegisterRandomFlipUdf, "random_flip"};

// Whether `flipped` is `image` mirrored left-right.
bool IsMirror(const Tensor& image, const Tensor& flipped) {
  if (image.dtype() != flipped.dtype() || image.shape() != flipped.shape()) return false;
  const int64_t h = image.shape()[0], w = image.shape()[1], c = image.shape()[2];
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t k = 0; k < c; ++k) {
        if (At(flipped, y, x, k) != At(image, y, w - 1 - x, k)) return false;
      }
    }
  }
  return true;
}

TEST(RandomFlipUdfTest, ProbabilityOneMirrorsUint8Images) {
  // Pixel sizes 1, 3 and 4 take the fixed-size paths, 2 and 5 the generic one.
  for (int64_t channels : {1, 2, 3, 4, 5}) {
    for (int64_t width : {1, 2, 5, 8}) {
      const Tensor image = PatternImage(3, width, channels);
      EXPECT_TRUE(IsMirror(image, ApplyUdf(kRandomFlip, R"({"probability": 1})", image, 5)))
          << image.DebugString();
    }
  }
}

TEST(RandomFlipUdfTest, ProbabilityOneMirrorsFloatImages) {
  for (int64_t channels : {1, 3, 4, 2}) {
    Tensor image(DT_FLOAT, {2, 7, channels});
    for (int64_t i = 0; i < image.num_elements(); ++i) image.data<float>()[i] = 1.25f * i;
    EXPECT_TRUE(IsMirror(image, ApplyUdf(kRandomFlip, R"({"probability": 1})", image, 5)))
        << image.DebugString();
  }
}

TEST(RandomFlipUdfTest, ProbabilityZeroNeverFlips) {
  const Tensor image = PatternImage(4, 6, 3);
  for (uint64_t key = 0; key < 50; ++key) {
    EXPECT_TRUE(ApplyUdf(kRandomFlip, R"({"probability": 0})", image, key) == image);
  }
}

TEST(RandomFlipUdfTest, SameKeyGivesIdenticalBytes) {
  const Tensor image = PatternImage(8, 8, 3);
  for (uint64_t key = 0; key < 20; ++key) {
    EXPECT_TRUE(ApplyUdf(kRandomFlip, "{}", image, key) == ApplyUdf(kRandomFlip, "{}", image, key));
  }
}

TEST(RandomFlipUdfTest, BothOutcomesOccurAboutEquallyOverKeys) {
  const Tensor image = PatternImage(2, 4, 3);
  int flipped = 0;
  constexpr int kKeys = 400;
  for (uint64_t key = 0; key < kKeys; ++key) {
    const Tensor out = ApplyUdf(kRandomFlip, "{}", image, key);
    if (out == image) continue;
    ASSERT_TRUE(IsMirror(image, out));
    ++flipped;
  }
  EXPECT_GT(flipped, kKeys * 0.35);
  EXPECT_LT(flipped, kKeys * 0.65);
}

TEST(RandomFlipUdfTest, FlipsTheTensorAtIndexOnly) {
  absl::StatusOr<std::unique_ptr<Udf>> udf =
      MakeUdf(kRandomFlip, R"({"index": 1, "probability": 1})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  const Tensor image = PatternImage(2, 3, 3);
  Element element = MakeElement({image, image});
  ASSERT_TRUE((*udf)->Map(element, UdfCall{}).ok());
  EXPECT_TRUE(element.tensors[0] == image);
  EXPECT_TRUE(IsMirror(image, element.tensors[1]));
}

TEST(RandomFlipUdfTest, IndexOutOfRangeIsAnError) {
  absl::Status status =
      UdfError(kRandomFlip, R"({"index": 1})", MakeElement({PatternImage(2, 2, 3)}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("random_flip: "));
  EXPECT_THAT(status.message(), HasSubstr("index 1 is out of range"));
  EXPECT_THAT(status.message(), HasSubstr("1 tensors"));
}

TEST(RandomFlipUdfTest, WrongDtypeIsAnError) {
  EXPECT_THAT(UdfError(kRandomFlip, "{}", MakeElement({Tensor::String("jpeg bytes")})).message(),
              HasSubstr("random_flip: tensor 0 is string[], need uint8 or float32"));
}

TEST(RandomFlipUdfTest, WrongRankIsAnError) {
  EXPECT_THAT(UdfError(kRandomFlip, "{}", MakeElement({Tensor(DT_FLOAT, {2, 2, 2, 3})})).message(),
              HasSubstr("random_flip: tensor 0 is float32[2,2,2,3], need an image"));
}

TEST(RandomFlipUdfTest, FactoryRejectsProbabilityOutOfRange) {
  EXPECT_THAT(MakeUdf(kRandomFlip, R"({"probability": 1.5})").status().message(),
              HasSubstr("param 'probability' must be in [0, 1], got 1.5"));
  EXPECT_THAT(MakeUdf(kRandomFlip, R"({"probability": -0.1})").status().message(),
              HasSubstr("param 'probability' must be in [0, 1], got -0.1"));
}

TEST(RandomFlipUdfTest, FactoryRejectsNegativeIndex) {
  EXPECT_THAT(MakeUdf(kRandomFlip, R"({"index": -3})").status().message(),
              HasSubstr("param 'index' must be >= 0, got -3"));
}

}  // namespace
}  // namespace granary::udf_test
