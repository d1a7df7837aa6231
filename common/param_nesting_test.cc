#include "common/param_nesting.h"

#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// A value of `depth` levels: objects {"n": ...} around a number, the innermost a list.
google::protobuf::Value Nested(int depth) {
  google::protobuf::Value value;
  value.set_number_value(1);
  if (depth == 0) return value;
  google::protobuf::Value list;
  *list.mutable_list_value()->add_values() = std::move(value);
  value = std::move(list);
  for (int level = 1; level < depth; ++level) {
    google::protobuf::Value outer;
    (*outer.mutable_struct_value()->mutable_fields())["n"] = std::move(value);
    value = std::move(outer);
  }
  return value;
}

PipelineDef WithUdfParam(int depth) {
  PipelineDef def;
  def.mutable_source()->set_type("range");
  OpDef* op = def.add_ops();
  op->set_op("batch");
  op = def.add_ops();
  op->set_op("map");
  op->set_udf("add");
  (*op->mutable_udf_params()->mutable_fields())["value"] = Nested(depth);
  return def;
}

TEST(ParamNestingTest, UpToTheLimitIsAccepted) {
  for (int depth : {0, 1, 2, kMaxParamNesting}) {
    EXPECT_TRUE(CheckParamNesting(WithUdfParam(depth)).ok()) << depth;
  }
}

TEST(ParamNestingTest, DeeperNamesTheOpTheUdfTheParamAndTheLimit) {
  for (int depth : {kMaxParamNesting + 1, 60, 1000}) {
    const absl::Status status = CheckParamNesting(WithUdfParam(depth));
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << depth << ": " << status;
    EXPECT_EQ(status.message(),
              "op 1 (map, udf 'add'): udfParams 'value' nests more than 16 levels deep "
              "(kMaxParamNesting)");
  }
}

TEST(ParamNestingTest, SourceAndOpParamsAreCheckedToo) {
  PipelineDef def;
  def.mutable_source()->set_type("range");
  (*def.mutable_source()->mutable_params()->mutable_fields())["stop"] =
      Nested(kMaxParamNesting + 1);
  EXPECT_THAT(std::string(CheckParamNesting(def).message()),
              HasSubstr("source (range): params 'stop' nests more than 16"));
  def.mutable_source()->clear_params();
  OpDef* op = def.add_ops();
  op->set_op("shuffle");
  (*op->mutable_params()->mutable_fields())["buffer_size"] = Nested(kMaxParamNesting + 1);
  EXPECT_THAT(std::string(CheckParamNesting(def).message()),
              HasSubstr("op 0 (shuffle): params 'buffer_size' nests more than 16"));
}

}  // namespace
}  // namespace granary
