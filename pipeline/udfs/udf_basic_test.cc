// Tests of the basic UDFs (udf_basic.cc): non_empty, string_length, modulo and add.
#include <memory>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary::udf_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr RegisteredUdf kNonEmpty = {RegisterBasicUdfs, "non_empty"};
constexpr RegisteredUdf kStringLength = {RegisterBasicUdfs, "string_length"};
constexpr RegisteredUdf kModulo = {RegisterBasicUdfs, "modulo"};
constexpr RegisteredUdf kAdd = {RegisterBasicUdfs, "add"};

// Builds the predicate `udf` from `params` and asks it whether to keep `element`.
absl::StatusOr<bool> RunKeep(const RegisteredUdf& udf, const std::string& params,
                             const Element& element) {
  absl::StatusOr<std::unique_ptr<Udf>> made = MakeUdf(udf, params);
  if (!made.ok()) return made.status();
  return (*made)->Keep(element, UdfCall());
}

// RunKeep that fails the test on error (returning false then).
bool Keeps(const RegisteredUdf& udf, const std::string& params, const Element& element) {
  const absl::StatusOr<bool> keep = RunKeep(udf, params, element);
  EXPECT_TRUE(keep.ok()) << udf.name << " " << params << ": " << keep.status();
  return keep.ok() && *keep;
}

TEST(NonEmptyUdfTest, KeepsElementsWithSomeNonEmptyString) {
  EXPECT_TRUE(Keeps(kNonEmpty, "{}", MakeElement({Tensor::String("line")})));
  EXPECT_TRUE(Keeps(kNonEmpty, "{}", MakeElement({Tensor::Strings({3}, {"", "", "x"})})));
  EXPECT_FALSE(Keeps(kNonEmpty, "{}", MakeElement({Tensor::String("")})));
  EXPECT_FALSE(Keeps(kNonEmpty, "{}", MakeElement({Tensor::Strings({2}, {"", ""})})));
}

TEST(NonEmptyUdfTest, LooksAtTheTensorAtIndex) {
  const Element element = MakeElement({Tensor::String("kept?"), Tensor::String("")});
  EXPECT_TRUE(Keeps(kNonEmpty, R"({"index": 0})", element));
  EXPECT_FALSE(Keeps(kNonEmpty, R"({"index": 1})", element));
}

TEST(StringLengthUdfTest, ReplacesStringsByTheirLengthsKeepingShape) {
  const Tensor out = ApplyUdf(kStringLength, "{}", Tensor::Strings({2, 2}, {"", "a", "abc", "xy"}));
  EXPECT_EQ(out.DebugString(), "int64[2,2]");
  EXPECT_THAT(Values<int64_t>(out), ElementsAre(0, 1, 3, 2));
}

TEST(StringLengthUdfTest, RejectsANumericTensor) {
  EXPECT_THAT(UdfError(kStringLength, "{}", MakeElement({Tensor::Scalar<int64_t>(4)})).message(),
              HasSubstr("string_length: tensor 0 is int64[], need string"));
}

TEST(ModuloUdfTest, KeepsValuesWithTheRemainder) {
  const std::string params = R"({"modulus": 3, "remainder": 1})";
  EXPECT_TRUE(Keeps(kModulo, params, MakeElement({Tensor::Scalar<int64_t>(7)})));
  EXPECT_FALSE(Keeps(kModulo, params, MakeElement({Tensor::Scalar<int64_t>(9)})));
  // A negative value's remainder is taken in [0, modulus): -2 = -1 * 3 + 1.
  EXPECT_TRUE(Keeps(kModulo, params, MakeElement({Tensor::Scalar<int64_t>(-2)})));
  EXPECT_FALSE(Keeps(kModulo, params, MakeElement({Tensor::Scalar<int64_t>(-1)})));
  // remainder defaults to 0.
  EXPECT_TRUE(Keeps(kModulo, R"({"modulus": 3})", MakeElement({Tensor::Scalar<int64_t>(9)})));
}

TEST(ModuloUdfTest, RejectsANonScalar) {
  const absl::StatusOr<bool> keep = RunKeep(
      kModulo, R"({"modulus": 2})", MakeElement({Tensor::FromVector<int64_t>({2}, {1, 2})}));
  EXPECT_THAT(keep.status().message(), HasSubstr("modulo: tensor 0 is int64[2], need a scalar"));
}

TEST(ModuloUdfTest, FactoryRejectsParamsOutOfRange) {
  EXPECT_THAT(MakeUdf(kModulo, "{}").status().message(),
              HasSubstr("missing required param 'modulus'"));
  EXPECT_THAT(MakeUdf(kModulo, R"({"modulus": 0})").status().message(),
              HasSubstr("param 'modulus' must be positive"));
  EXPECT_THAT(MakeUdf(kModulo, R"({"modulus": -3})").status().message(),
              HasSubstr("param 'modulus' must be positive"));
  EXPECT_THAT(MakeUdf(kModulo, R"({"modulus": 3, "remainder": 3})").status().message(),
              HasSubstr("param 'remainder' must be in [0, modulus)"));
  EXPECT_THAT(MakeUdf(kModulo, R"({"modulus": 3, "remainder": -1})").status().message(),
              HasSubstr("param 'remainder' must be in [0, modulus)"));
  EXPECT_TRUE(MakeUdf(kModulo, R"({"modulus": 3, "remainder": 2})").ok());
}

TEST(AddUdfTest, AddsTheValueToEveryValueOfTheTensorAtIndex) {
  const Element out = ApplyUdf(
      kAdd, R"({"index": 1, "value": -5})",
      MakeElement({Tensor::Scalar<int64_t>(1), Tensor::FromVector<int64_t>({3}, {0, 5, 100})}));
  ASSERT_EQ(out.tensors.size(), 2u);
  EXPECT_THAT(Values<int64_t>(out.tensors[0]), ElementsAre(1));
  EXPECT_EQ(out.tensors[1].DebugString(), "int64[3]");
  EXPECT_THAT(Values<int64_t>(out.tensors[1]), ElementsAre(-5, 0, 95));
}

TEST(AddUdfTest, FactoryRequiresValue) {
  EXPECT_THAT(MakeUdf(kAdd, "{}").status().message(), HasSubstr("missing required param 'value'"));
}

TEST(BasicUdfsTest, FactoriesRejectNegativeIndex) {
  const std::pair<RegisteredUdf, std::string> cases[] = {
      {kNonEmpty, R"({"index": -2})"},
      {kStringLength, R"({"index": -2})"},
      {kModulo, R"({"index": -2, "modulus": 2})"},
      {kAdd, R"({"index": -2, "value": 1})"},
  };
  for (const auto& [udf, params] : cases) {
    EXPECT_THAT(MakeUdf(udf, params).status().message(),
                HasSubstr("param 'index' must be >= 0, got -2"))
        << udf.name;
  }
}

}  // namespace
}  // namespace granary::udf_test

namespace granary::udf_test {
namespace {

TEST(FillBytesUdfTest, ReplacesTheElementByBytesOfItsRecordIndex) {
  Element element;
  element.tensors.push_back(Tensor::Scalar<int64_t>(5));
  element.record = 258;
  auto udf = MakeUdf({RegisterBasicUdfs, "fill_bytes"}, R"({"bytes": 1000})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  ASSERT_TRUE((*udf)->Map(element, UdfCall{}).ok());
  ASSERT_EQ(element.tensors.size(), 1u);
  EXPECT_EQ(element.tensors[0].DebugString(), "uint8[1000]");
  EXPECT_EQ(element.tensors[0].content(), std::string(1000, '\x02'));
}

TEST(FillBytesUdfTest, SizeOutOfRangeIsRejected) {
  EXPECT_THAT(std::string(MakeUdf({RegisterBasicUdfs, "fill_bytes"}, R"({"bytes": 0})")
                              .status()
                              .message()),
              ::testing::HasSubstr("param 'bytes' must be in [1, 2^31]"));
}

}  // namespace
}  // namespace granary::udf_test
