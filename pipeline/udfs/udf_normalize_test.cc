// Tests of the normalize UDF (udf_normalize.cc).
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/core/row_destination.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary::udf_test {
namespace {

using ::testing::HasSubstr;

constexpr RegisteredUdf kNormalize = {RegisterNormalizeUdf, "normalize"};

Tensor ToFloat(const Tensor& image) {
  Tensor out(DT_FLOAT, image.shape());
  for (int64_t i = 0; i < image.num_elements(); ++i) {
    out.data<float>()[i] = image.data<uint8_t>()[i];
  }
  return out;
}

TEST(NormalizeUdfTest, DefaultsScaleBy255) {
  const Tensor out =
      ApplyUdf(kNormalize, "{}", Tensor::FromVector<uint8_t>({1, 3, 1}, {0, 51, 255}));
  EXPECT_EQ(out.DebugString(), "float32[1,3,1]");
  EXPECT_FLOAT_EQ(out.data<float>()[0], 0.0f);
  EXPECT_FLOAT_EQ(out.data<float>()[1], 0.2f);
  EXPECT_FLOAT_EQ(out.data<float>()[2], 1.0f);
}

TEST(NormalizeUdfTest, OneMeanAndStdForAllChannels) {
  const Tensor out = ApplyUdf(kNormalize, R"({"mean": [0.5], "std": [0.25]})",
                              Tensor::FromVector<uint8_t>({1, 2, 3}, {0, 255, 0, 255, 0, 255}));
  const float expected[] = {-2, 2, -2, 2, -2, 2};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out.data<float>()[i], expected[i]) << i;
}

TEST(NormalizeUdfTest, PerChannelMeanAndStd) {
  const float mean[] = {0.485f, 0.456f, 0.406f};
  const float std[] = {0.229f, 0.224f, 0.225f};
  const Tensor image = PatternImage(5, 4, 3);
  const Tensor out = ApplyUdf(
      kNormalize, R"({"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]})", image);
  EXPECT_EQ(out.DebugString(), "float32[5,4,3]");
  for (int64_t i = 0; i < image.num_elements(); ++i) {
    const int c = i % 3;
    const float x = image.data<uint8_t>()[i];
    EXPECT_FLOAT_EQ(out.data<float>()[i], (x * (1.0f / 255.0f) - mean[c]) / std[c]) << i;
  }
}

TEST(NormalizeUdfTest, MixesOneMeanWithPerChannelStd) {
  const Tensor out = ApplyUdf(kNormalize, R"({"scale": 1, "mean": [10], "std": [1, 2, 5]})",
                              Tensor::FromVector<uint8_t>({1, 1, 3}, {20, 20, 20}));
  EXPECT_FLOAT_EQ(out.data<float>()[0], 10.0f);
  EXPECT_FLOAT_EQ(out.data<float>()[1], 5.0f);
  EXPECT_FLOAT_EQ(out.data<float>()[2], 2.0f);
}

TEST(NormalizeUdfTest, ScaleParam) {
  const Tensor out = ApplyUdf(kNormalize, R"({"scale": 1, "mean": [128], "std": [64]})",
                              Tensor::FromVector<uint8_t>({1, 2, 1}, {192, 0}));
  EXPECT_FLOAT_EQ(out.data<float>()[0], 1.0f);
  EXPECT_FLOAT_EQ(out.data<float>()[1], -2.0f);
}

TEST(NormalizeUdfTest, FloatInputGivesTheSameBytesAsUint8) {
  const std::string params = R"({"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]})";
  const Tensor image = PatternImage(7, 6, 3);
  EXPECT_TRUE(ApplyUdf(kNormalize, params, image) == ApplyUdf(kNormalize, params, ToFloat(image)));
  const Tensor gray = PatternImage(3, 3, 1);
  EXPECT_TRUE(ApplyUdf(kNormalize, R"({"mean": [0.5], "std": [0.2]})", gray) ==
              ApplyUdf(kNormalize, R"({"mean": [0.5], "std": [0.2]})", ToFloat(gray)));
}

// Every uint8 value in every channel, for channel counts the vector path serves (1, 2, 3, 4, 6)
// and one it does not (5), over lengths that leave a tail: the same bytes as the float32 path,
// and the formula's value.
TEST(NormalizeUdfTest, EveryValueInEveryChannelMatchesTheFloatPathBitForBit) {
  for (int channels : {1, 2, 3, 4, 5, 6}) {
    std::vector<float> mean, std;
    for (int c = 0; c < channels; ++c) {
      mean.push_back(0.4f + 0.03f * c);
      std.push_back(0.21f + 0.01f * c);
    }
    const std::string params = absl::StrCat(R"({"mean": [)", absl::StrJoin(mean, ", "),
                                            R"(], "std": [)", absl::StrJoin(std, ", "), "]}");
    for (int64_t width : {256, 257, 261, 263}) {
      const Tensor image = PatternImage(1, width, channels);
      const Tensor out = ApplyUdf(kNormalize, params, image);
      const Tensor from_float = ApplyUdf(kNormalize, params, ToFloat(image));
      ASSERT_EQ(std::memcmp(out.data<float>(), from_float.data<float>(),
                            image.num_elements() * sizeof(float)),
                0)
          << channels << " channels, width " << width;
      for (int64_t i = 0; i < image.num_elements(); ++i) {
        const int c = static_cast<int>(i % channels);
        const float x = image.data<uint8_t>()[i];
        ASSERT_FLOAT_EQ(out.data<float>()[i], (x * (1.0f / 255.0f) - mean[c]) / std[c])
            << channels << " channels, width " << width << ", value " << i;
      }
    }
  }
}

// Made in its batch (row_destination.h), the output is written into the destination (with
// streaming stores) and has the same bytes as one made in fresh memory.
TEST(NormalizeUdfTest, WritesIntoItsRowDestinationTheSameBytes) {
  const std::string params = R"({"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]})";
  const Tensor image = PatternImage(9, 11, 3);
  const Tensor expected = ApplyUdf(kNormalize, params, image);
  alignas(64) static float batch_row[9 * 11 * 3];
  std::vector<RowDestination> destinations(1);
  destinations[0].dtype = DT_FLOAT;
  destinations[0].shape = {9, 11, 3};
  destinations[0].data = reinterpret_cast<char*>(batch_row);
  absl::StatusOr<std::unique_ptr<Udf>> udf = MakeUdf(kNormalize, params);
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({image});
  {
    ScopedRowDestinations scope(&destinations);
    ASSERT_TRUE((*udf)->Map(element, UdfCall{}).ok());
  }
  EXPECT_TRUE(destinations[0].claimed);
  EXPECT_EQ(element.tensors[0].data<float>(), batch_row);
  EXPECT_TRUE(element.tensors[0] == expected);
}

TEST(NormalizeUdfTest, FourChannelsPerChannelValues) {
  const std::string params = R"({"scale": 1, "mean": [0, 1, 2, 3], "std": [1, 2, 4, 8]})";
  const Tensor image = Tensor::FromVector<uint8_t>({1, 2, 4}, {10, 11, 12, 13, 20, 21, 22, 23});
  const Tensor out = ApplyUdf(kNormalize, params, image);
  const float expected[] = {10, 5, 2.5, 1.25, 20, 10, 5, 2.5};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out.data<float>()[i], expected[i]) << i;
  EXPECT_TRUE(ApplyUdf(kNormalize, params, ToFloat(image)) == out);
}

TEST(NormalizeUdfTest, NormalizesTheTensorAtIndex) {
  absl::StatusOr<std::unique_ptr<Udf>> udf = MakeUdf(kNormalize, R"({"index": 1})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({Tensor::Scalar<int64_t>(4), PatternImage(2, 2, 3)});
  ASSERT_TRUE((*udf)->Map(element, UdfCall{}).ok());
  EXPECT_EQ(element.tensors[0].DebugString(), "int64[]");
  EXPECT_EQ(element.tensors[1].DebugString(), "float32[2,2,3]");
}

TEST(NormalizeUdfTest, MeanLengthNotMatchingChannelsIsAnError) {
  absl::Status status =
      UdfError(kNormalize, R"({"mean": [0.5, 0.5]})", MakeElement({PatternImage(2, 2, 3)}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("normalize: mean has 2 values but the image uint8[2,2,3] has 3 channels; "
                        "give one value or one per channel"));
}

TEST(NormalizeUdfTest, StdLengthNotMatchingChannelsIsAnError) {
  EXPECT_THAT(
      UdfError(kNormalize, R"({"std": [1, 1, 1]})", MakeElement({PatternImage(2, 2, 1)})).message(),
      HasSubstr("normalize: std has 3 values but the image uint8[2,2,1] has 1 channels"));
}

TEST(NormalizeUdfTest, IndexOutOfRangeIsAnError) {
  absl::Status status =
      UdfError(kNormalize, R"({"index": 1})", MakeElement({PatternImage(2, 2, 3)}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("normalize: "));
  EXPECT_THAT(status.message(), HasSubstr("index 1 is out of range"));
  EXPECT_THAT(status.message(), HasSubstr("1 tensors"));
}

TEST(NormalizeUdfTest, WrongDtypeIsAnError) {
  EXPECT_THAT(UdfError(kNormalize, "{}", MakeElement({Tensor(DT_INT32, {2, 2, 3})})).message(),
              HasSubstr("normalize: tensor 0 is int32[2,2,3], need uint8 or float32"));
}

TEST(NormalizeUdfTest, WrongRankIsAnError) {
  EXPECT_THAT(UdfError(kNormalize, "{}", MakeElement({Tensor(DT_FLOAT, {2, 3})})).message(),
              HasSubstr("normalize: tensor 0 is float32[2,3], need an image"));
}

TEST(NormalizeUdfTest, FactoryRejectsZeroStd) {
  EXPECT_THAT(MakeUdf(kNormalize, R"({"std": [0.2, 0, 0.2]})").status().message(),
              HasSubstr("param 'std' entry 1 is 0; std must be non-zero"));
}

TEST(NormalizeUdfTest, FactoryRejectsEmptyLists) {
  EXPECT_THAT(MakeUdf(kNormalize, R"({"mean": []})").status().message(),
              HasSubstr("param 'mean' must have at least one value"));
  EXPECT_THAT(MakeUdf(kNormalize, R"({"std": []})").status().message(),
              HasSubstr("param 'std' must have at least one value"));
}

TEST(NormalizeUdfTest, FactoryRejectsDisagreeingPerChannelLists) {
  EXPECT_THAT(MakeUdf(kNormalize, R"({"mean": [1, 2, 3], "std": [1, 2]})").status().message(),
              HasSubstr("param 'std' has 2 values but mean has 3"));
}

}  // namespace
}  // namespace granary::udf_test
