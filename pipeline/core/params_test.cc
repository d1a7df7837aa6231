#include "pipeline/core/params.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

google::protobuf::Struct Json(const std::string& text) {
  google::protobuf::Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &s).ok()) << text;
  return s;
}

const std::vector<ParamSpec> kSpecs = {{"size", ParamType::kInt, true},
                                       {"rate", ParamType::kFloat},
                                       {"on", ParamType::kBool},
                                       {"name", ParamType::kString},
                                       {"files", ParamType::kStringList},
                                       {"mean", ParamType::kFloatList}};

TEST(ParamsTest, ReadsDeclaredValuesAndFallsBack) {
  auto p = Params::Create(
      Json(R"({"size": 7, "rate": 0.5, "files": ["a", "b"], "mean": [1, 2.5]})"), kSpecs, "op 1");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->GetInt("size"), 7);
  EXPECT_EQ(p->GetFloat("rate"), 0.5);
  EXPECT_TRUE(p->GetBool("on", true));
  EXPECT_EQ(p->GetString("name", "x"), "x");
  EXPECT_THAT(p->GetStringList("files"), ::testing::ElementsAre("a", "b"));
  EXPECT_THAT(p->GetFloatList("mean"), ::testing::ElementsAre(1.0, 2.5));
  EXPECT_TRUE(p->Has("size"));
  EXPECT_FALSE(p->Has("on"));
}

TEST(ParamsTest, UnknownParamIsNamedWithTheKnownOnes) {
  auto p = Params::Create(Json(R"({"size": 1, "sise": 2})"), kSpecs, "op 4 (shuffle)");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("op 4 (shuffle): unknown param 'sise'"));
  EXPECT_THAT(p.status().message(), HasSubstr("known: size, rate"));
}

TEST(ParamsTest, OfSeveralFaultsTheFirstByNameIsReportedEveryTime) {
  // A proto map iterates in an unspecified order, different across maps of the same content.
  for (int i = 0; i < 50; ++i) {
    google::protobuf::Struct values;
    for (int j = 0; j < 20; ++j) {
      (*values.mutable_fields())[absl::StrCat("zz", (j * 7 + i) % 20)].set_number_value(1);
    }
    (*values.mutable_fields())["aa"].set_number_value(1);
    auto p = Params::Create(values, kSpecs, "op 0");
    ASSERT_FALSE(p.ok());
    EXPECT_THAT(p.status().message(), HasSubstr("unknown param 'aa'")) << "map " << i;
  }
}

TEST(ParamsTest, WrongTypeNamesParamExpectedAndActual) {
  auto p = Params::Create(Json(R"({"size": "big"})"), kSpecs, "op 2 (batch)");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("op 2 (batch): param 'size' must be an integer, got string \"big\""));
}

TEST(ParamsTest, FractionalNumberIsNotAnInteger) {
  auto p = Params::Create(Json(R"({"size": 2.5})"), kSpecs, "op 0");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("must be an integer, got number 2.5"));
}

TEST(ParamsTest, ListWithWrongElementTypeIsRejected) {
  auto p = Params::Create(Json(R"({"size": 1, "files": ["a", 3]})"), kSpecs, "source tfrecord");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("param 'files' must be a list of strings"));
}

TEST(ParamsTest, MissingRequiredParamIsNamed) {
  auto p = Params::Create(Json(R"({"rate": 1})"), kSpecs, "op 3 (take)");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("op 3 (take): missing required param 'size'"));
}

TEST(ParamsTest, InvalidNamesOwnerAndParam) {
  auto p = Params::Create(Json(R"({"size": -1})"), kSpecs, "op 5 (batch)");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Invalid("size", "must be at least 1").message(),
            "op 5 (batch): param 'size' must be at least 1");
}

}  // namespace
}  // namespace granary
