// simulate_cost (udf_simulate_cost.cc): the element passes unchanged, after at least the time
// asked for; out-of-range costs are refused naming the param.
#include <chrono>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary::udf_test {
namespace {

constexpr RegisteredUdf kSimulateCost = {RegisterSimulateCostUdf, "simulate_cost"};

TEST(SimulateCostUdfTest, PassesTheElementOnAfterTheTimeAskedFor) {
  Element in;
  in.tensors.push_back(Tensor::Scalar<int64_t>(42));
  const auto start = std::chrono::steady_clock::now();
  const Element out = ApplyUdf(kSimulateCost, R"({"us_per_element": 20000})", in);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  EXPECT_TRUE(out == in);
}

TEST(SimulateCostUdfTest, OutOfRangeCostsAreRefused) {
  for (const char* params : {R"({"us_per_element": -1})", R"({"us_per_element": 10000001})"}) {
    const auto made = MakeUdf(kSimulateCost, params);
    EXPECT_TRUE(absl::IsInvalidArgument(made.status())) << params;
    EXPECT_THAT(made.status().message(), ::testing::HasSubstr("us_per_element")) << params;
  }
  EXPECT_FALSE(MakeUdf(kSimulateCost, "{}").ok()) << "the cost is required";
}

}  // namespace
}  // namespace granary::udf_test
