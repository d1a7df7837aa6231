#include "dispatcher/python_function_grant.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

PipelineDef WithUdf(const std::string& udf) {
  PipelineDef pipeline;
  pipeline.mutable_source()->set_type("range");
  pipeline.add_ops()->set_op("batch");
  OpDef& op = *pipeline.add_ops();
  op.set_op(udf == "python_filter" ? "filter" : "map");
  op.set_udf(udf);
  return pipeline;
}

Caller Client(const std::string& name) { return {.authenticated = true, .client = name}; }

TEST(PythonFunctionGrantTest, APipelineWithoutPythonNeedsNoGrant) {
  EXPECT_TRUE(CheckPythonFunctionGrant(WithUdf("decode_image"), Client("mallory"), {}).ok());
}

TEST(PythonFunctionGrantTest, AnUngrantedClientIsRefusedNamingTheOpTheClientAndTheFlag) {
  for (const std::string udf : {"python", "python_filter"}) {
    const absl::Status status =
        CheckPythonFunctionGrant(WithUdf(udf), Client("mallory"), {"alice"});
    EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr("pipeline op 1"));
    EXPECT_THAT(status.message(), HasSubstr("UDF " + udf));
    EXPECT_THAT(status.message(), HasSubstr("client 'mallory'"));
    EXPECT_THAT(status.message(), HasSubstr("--python_udf_clients"));
  }
}

TEST(PythonFunctionGrantTest, AGrantedClientAndTheWildcardPass) {
  EXPECT_TRUE(CheckPythonFunctionGrant(WithUdf("python"), Client("alice"), {"bob", "alice"}).ok());
  EXPECT_TRUE(CheckPythonFunctionGrant(WithUdf("python"), Client("mallory"), {"*"}).ok());
  EXPECT_FALSE(CheckPythonFunctionGrant(WithUdf("python"), Client("alice"), {}).ok())
      << "no grant by default";
}

TEST(PythonFunctionGrantTest, AnUnauthenticatedCallerMayDoEverything) {
  EXPECT_TRUE(CheckPythonFunctionGrant(WithUdf("python"), Caller(), {}).ok());
}

}  // namespace
}  // namespace granary
