// Tests of the cast UDF (udf_cast.cc).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary::udf_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr RegisteredUdf kCast = {RegisterCastUdf, "cast"};

// `input` cast to `dtype`; fails the test on error.
Tensor Cast(const std::string& dtype, const Tensor& input) {
  return ApplyUdf(kCast, "{\"dtype\": \"" + dtype + "\"}", input);
}

TEST(CastUdfTest, Uint8ToFloatKeepsValuesAndShape) {
  const Tensor out = Cast("float32", Tensor::FromVector<uint8_t>({2, 1, 2}, {0, 1, 128, 255}));
  EXPECT_EQ(out.DebugString(), "float32[2,1,2]");
  EXPECT_THAT(Values<float>(out), ElementsAre(0, 1, 128, 255));
}

TEST(CastUdfTest, FloatToUint8TruncatesAndSaturates) {
  const Tensor out = Cast(
      "uint8", Tensor::FromVector<float>({6}, {3.9f, -5.7f, 300.2f, std::nanf(""), 255.0f, 0.99f}));
  EXPECT_EQ(out.DebugString(), "uint8[6]");
  EXPECT_THAT(Values<uint8_t>(out), ElementsAre(3, 0, 255, 0, 255, 0));
}

TEST(CastUdfTest, FloatToInt32TruncatesTowardZero) {
  const Tensor out = Cast("int32", Tensor::FromVector<float>({4}, {-3.7f, 3.7f, -0.5f, 1e10f}));
  EXPECT_THAT(Values<int32_t>(out), ElementsAre(-3, 3, 0, std::numeric_limits<int32_t>::max()));
}

TEST(CastUdfTest, DoubleToInt64Saturates) {
  const Tensor out = Cast("int64", Tensor::FromVector<double>({3}, {1e30, -1e30, 42.9}));
  EXPECT_THAT(Values<int64_t>(out), ElementsAre(std::numeric_limits<int64_t>::max(),
                                                std::numeric_limits<int64_t>::min(), 42));
}

TEST(CastUdfTest, IntegerNarrowingWrapsAround) {
  const Tensor out = Cast("int32", Tensor::FromVector<int64_t>({2}, {(int64_t{1} << 32) + 5, -1}));
  EXPECT_THAT(Values<int32_t>(out), ElementsAre(5, -1));
  const Tensor bytes = Cast("uint8", Tensor::FromVector<int32_t>({2}, {256 + 7, -1}));
  EXPECT_THAT(Values<uint8_t>(bytes), ElementsAre(7, 255));
}

TEST(CastUdfTest, ToAndFromBool) {
  const Tensor flags = Cast("bool", Tensor::FromVector<int64_t>({3}, {0, 5, -1}));
  EXPECT_EQ(flags.DebugString(), "bool[3]");
  EXPECT_THAT(Values<bool>(flags), ElementsAre(false, true, true));
  const Tensor back = Cast("float64", flags);
  EXPECT_THAT(Values<double>(back), ElementsAre(0.0, 1.0, 1.0));
  const Tensor from_float = Cast("bool", Tensor::FromVector<float>({2}, {0.0f, 0.25f}));
  EXPECT_THAT(Values<bool>(from_float), ElementsAre(false, true));
}

TEST(CastUdfTest, Int64ToFloat32) {
  const Tensor out = Cast("float32", Tensor::FromVector<int64_t>({2}, {-7, 1 << 20}));
  EXPECT_THAT(Values<float>(out), ElementsAre(-7.0f, 1048576.0f));
}

TEST(CastUdfTest, SameDtypeIsANoOp) {
  const Tensor input = Tensor::FromVector<int32_t>({3}, {1, 2, 3});
  EXPECT_TRUE(Cast("int32", input) == input);
}

TEST(CastUdfTest, CastsTheTensorAtIndex) {
  absl::StatusOr<std::unique_ptr<Udf>> udf = MakeUdf(kCast, R"({"index": 1, "dtype": "float64"})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({Tensor::String("x"), Tensor::Scalar<int32_t>(9)});
  ASSERT_TRUE((*udf)->Map(element, UdfCall{}).ok());
  EXPECT_EQ(element.tensors[0].DebugString(), "string[]");
  EXPECT_EQ(element.tensors[1].DebugString(), "float64[]");
  EXPECT_EQ(element.tensors[1].data<double>()[0], 9.0);
}

TEST(CastUdfTest, StringInputIsAnError) {
  absl::StatusOr<std::unique_ptr<Udf>> udf = MakeUdf(kCast, R"({"dtype": "int64"})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({Tensor::String("12")});
  absl::Status status = (*udf)->Map(element, UdfCall{});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("cast: tensor 0 is string[], need uint8 or int32"));
}

TEST(CastUdfTest, IndexOutOfRangeIsAnError) {
  absl::StatusOr<std::unique_ptr<Udf>> udf = MakeUdf(kCast, R"({"index": 5, "dtype": "int64"})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(2)});
  absl::Status status = (*udf)->Map(element, UdfCall{});
  EXPECT_THAT(status.message(), HasSubstr("cast: "));
  EXPECT_THAT(status.message(), HasSubstr("index 5 is out of range"));
  EXPECT_THAT(status.message(), HasSubstr("2 tensors"));
}

TEST(CastUdfTest, FactoryRejectsUnknownDtype) {
  absl::StatusOr<std::unique_ptr<Udf>> udf = MakeUdf(kCast, R"({"dtype": "float"})");
  EXPECT_EQ(udf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(udf.status().message(),
              HasSubstr("param 'dtype' is 'float', not one of uint8, int32, int64, "
                        "float32, float64, bool"));
}

TEST(CastUdfTest, FactoryRejectsString) {
  EXPECT_THAT(MakeUdf(kCast, R"({"dtype": "string"})").status().message(),
              HasSubstr("param 'dtype' is 'string'; cast converts only between numeric dtypes"));
}

TEST(CastUdfTest, FactoryRequiresDtype) {
  EXPECT_THAT(MakeUdf(kCast, "{}").status().message(), HasSubstr("missing required param 'dtype'"));
}

TEST(CastUdfTest, FactoryRejectsNegativeIndex) {
  EXPECT_THAT(MakeUdf(kCast, R"({"index": -1, "dtype": "int64"})").status().message(),
              HasSubstr("param 'index' must be >= 0, got -1"));
}

}  // namespace
}  // namespace granary::udf_test
