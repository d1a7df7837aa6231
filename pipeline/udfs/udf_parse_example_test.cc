// Tests of the parse_example UDF (udf_parse_example.cc).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/udfs/udf_test_util.h"
#include "proto/example.pb.h"

namespace granary::udf_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr RegisteredUdf kParseExample = {RegisterParseExampleUdf, "parse_example"};

// Runs parse_example with `params` over one serialized example.
absl::StatusOr<Element> Parse(const std::string& params, const std::string& record) {
  return RunUdf(kParseExample, params, MakeElement({Tensor::String(record)}));
}

std::string SerializedExample(const std::string& key, const tfexample::Feature& feature) {
  tfexample::Example example;
  (*example.mutable_features()->mutable_feature())[key] = feature;
  return example.SerializeAsString();
}

tfexample::Feature Int64s(std::vector<int64_t> values) {
  tfexample::Feature f;
  for (int64_t v : values) f.mutable_int64_list()->add_value(v);
  return f;
}

TEST(ParseExampleUdfTest, ParsesImagenetRecord) {
  const std::vector<std::string> records =
      ReadTestRecords("imagenet_inception_train-00000-of-00001.tfrecord");
  ASSERT_EQ(records.size(), 1u);
  absl::StatusOr<Element> element = Parse(
      R"({"keys": ["image/encoded", "image/class/label", "image/height", "image/width",
                   "image/format", "image/object/bbox/xmin", "image/class/synset",
                   "image/object/bbox/ymax"],
          "dtypes": ["bytes", "int64", "int64", "int64", "bytes", "float_list", "bytes_list",
                     "float"]})",
      records[0]);
  ASSERT_TRUE(element.ok()) << element.status();
  const std::vector<Tensor>& t = element->tensors;
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t[0].DebugString(), "string[]");
  EXPECT_EQ(t[0].strings()[0].size(), 185243u);
  EXPECT_EQ(t[0].strings()[0].substr(0, 3), "\xFF\xD8\xFF");
  EXPECT_EQ(t[1].DebugString(), "int64[]");
  EXPECT_EQ(t[1].data<int64_t>()[0], 0);
  EXPECT_EQ(t[2].data<int64_t>()[0], 480);
  EXPECT_EQ(t[3].data<int64_t>()[0], 640);
  EXPECT_EQ(t[4].strings()[0], "JPEG");
  EXPECT_EQ(t[5].DebugString(), "float32[1]");
  EXPECT_FLOAT_EQ(t[5].data<float>()[0], 0.10781250149011612f);
  EXPECT_EQ(t[6].DebugString(), "string[1]");
  EXPECT_THAT(t[6].strings()[0], ::testing::StartsWith("n0211034"));
  EXPECT_EQ(t[7].DebugString(), "float32[]");
  EXPECT_FLOAT_EQ(t[7].data<float>()[0], 0.53125f);
}

TEST(ParseExampleUdfTest, ParsesCifarRecords) {
  const std::vector<std::string> records = ReadTestRecords("cifar10_png.tfrecord");
  ASSERT_EQ(records.size(), 4u);
  for (const std::string& record : records) {
    absl::StatusOr<Element> element = Parse(
        R"({"keys": ["image/class/label", "image/height", "image/width", "image/format"],
            "dtypes": ["int64", "int64_list", "int64", "bytes"]})",
        record);
    ASSERT_TRUE(element.ok()) << element.status();
    const std::vector<Tensor>& t = element->tensors;
    EXPECT_EQ(t[0].data<int64_t>()[0], 0);
    EXPECT_EQ(t[1].DebugString(), "int64[1]");
    EXPECT_EQ(t[1].data<int64_t>()[0], 32);
    EXPECT_EQ(t[2].data<int64_t>()[0], 32);
    EXPECT_EQ(t[3].strings()[0], "png");
  }
}

TEST(ParseExampleUdfTest, ParsesTutorialImageHeightsAndLabels) {
  const std::vector<std::string> records = ReadTestRecords("tutorial_images.tfrecord");
  ASSERT_EQ(records.size(), 2u);
  const int64_t heights[] = {213, 239};
  const int64_t widths[] = {320, 194};
  const int64_t depths[] = {3, 1};
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Element> element = Parse(R"({"keys": ["label", "height", "width", "depth"],
                  "dtypes": ["int64", "int64", "int64", "int64"]})",
                                            records[i]);
    ASSERT_TRUE(element.ok()) << element.status();
    EXPECT_EQ(element->tensors[0].data<int64_t>()[0], i);
    EXPECT_EQ(element->tensors[1].data<int64_t>()[0], heights[i]);
    EXPECT_EQ(element->tensors[2].data<int64_t>()[0], widths[i]);
    EXPECT_EQ(element->tensors[3].data<int64_t>()[0], depths[i]);
  }
}

TEST(ParseExampleUdfTest, ParsesTutorialFeatures) {
  const std::vector<std::string> records = ReadTestRecords("tutorial_features.tfrecord");
  ASSERT_EQ(records.size(), 42u);
  absl::StatusOr<Element> element =
      Parse(R"({"keys": ["feature0", "feature1", "feature2", "feature3"],
                "dtypes": ["int64", "int64", "bytes", "float"]})",
            records[0]);
  ASSERT_TRUE(element.ok()) << element.status();
  EXPECT_EQ(element->tensors[0].data<int64_t>()[0], 0);
  EXPECT_EQ(element->tensors[1].data<int64_t>()[0], 2);
  EXPECT_EQ(element->tensors[2].strings()[0], "chicken");
  EXPECT_FLOAT_EQ(element->tensors[3].data<float>()[0], -1.1237505674362183f);
  for (const std::string& record : records) {
    ASSERT_TRUE(Parse(R"({"keys": ["feature2"], "dtypes": ["bytes"]})", record).ok());
  }
}

TEST(ParseExampleUdfTest, ListDtypesKeepEveryValue) {
  absl::StatusOr<Element> element = Parse(R"({"keys": ["x"], "dtypes": ["int64_list"]})",
                                          SerializedExample("x", Int64s({4, 5, 6})));
  ASSERT_TRUE(element.ok()) << element.status();
  EXPECT_EQ(element->tensors[0].DebugString(), "int64[3]");
  EXPECT_THAT(std::vector<int64_t>(element->tensors[0].data<int64_t>(),
                                   element->tensors[0].data<int64_t>() + 3),
              ElementsAre(4, 5, 6));
}

TEST(ParseExampleUdfTest, FeatureWithoutValueIsAnEmptyList) {
  absl::StatusOr<Element> element = Parse(R"({"keys": ["x"], "dtypes": ["float_list"]})",
                                          SerializedExample("x", tfexample::Feature()));
  ASSERT_TRUE(element.ok()) << element.status();
  EXPECT_EQ(element->tensors[0].DebugString(), "float32[0]");
}

TEST(ParseExampleUdfTest, KeepsTheProvenance) {
  absl::StatusOr<std::unique_ptr<Udf>> udf =
      MakeUdf(kParseExample, R"({"keys": ["x"], "dtypes": ["int64"]})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({Tensor::String(SerializedExample("x", Int64s({9})))});
  element.split_id = 3;
  element.record = 17;
  ASSERT_TRUE((*udf)->Map(element, UdfCall{}).ok());
  EXPECT_EQ(element.split_id, 3u);
  EXPECT_EQ(element.record, 17);
}

TEST(ParseExampleUdfTest, MissingFeatureIsNamed) {
  const std::vector<std::string> records = ReadTestRecords("cifar10_png.tfrecord");
  ASSERT_FALSE(records.empty());
  absl::StatusOr<Element> element =
      Parse(R"({"keys": ["image/class/label", "image/label"], "dtypes": ["int64", "int64"]})",
            records[0]);
  EXPECT_EQ(element.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(element.status().message(),
              HasSubstr("parse_example: feature 'image/label' missing (the example has: "
                        "image/class/label, image/encoded, image/format, image/height, "
                        "image/width)"));
}

TEST(ParseExampleUdfTest, ScalarDtypeWithSeveralValuesIsAnError) {
  absl::StatusOr<Element> element =
      Parse(R"({"keys": ["x"], "dtypes": ["int64"]})", SerializedExample("x", Int64s({1, 2, 3})));
  EXPECT_EQ(element.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(element.status().message(),
              HasSubstr("parse_example: feature 'x' has 3 values, dtype 'int64' needs exactly 1"));
}

TEST(ParseExampleUdfTest, ScalarDtypeWithNoValueIsAnError) {
  absl::StatusOr<Element> element =
      Parse(R"({"keys": ["x"], "dtypes": ["bytes"]})", SerializedExample("x", Int64s({})));
  EXPECT_THAT(element.status().message(),
              HasSubstr("parse_example: feature 'x' has 0 values, dtype 'bytes' needs exactly 1"));
}

TEST(ParseExampleUdfTest, WrongKindIsAnError) {
  absl::StatusOr<Element> element =
      Parse(R"({"keys": ["x"], "dtypes": ["float"]})", SerializedExample("x", Int64s({1})));
  EXPECT_EQ(element.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(element.status().message(),
              HasSubstr("parse_example: feature 'x' is an int64_list, dtype 'float' needs a "
                        "float_list"));
}

TEST(ParseExampleUdfTest, BytesThatAreNotAnExampleAreAnError) {
  absl::StatusOr<Element> element =
      Parse(R"({"keys": ["x"], "dtypes": ["int64"]})", std::string("\xFF\xFF\xFF\xFF", 4));
  EXPECT_EQ(element.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(element.status().message(),
              HasSubstr("parse_example: the input (4 bytes) is not a serialized tf.train.Example"));
}

TEST(ParseExampleUdfTest, InputThatIsNotOneStringScalarIsAnError) {
  absl::StatusOr<std::unique_ptr<Udf>> udf =
      MakeUdf(kParseExample, R"({"keys": ["x"], "dtypes": ["int64"]})");
  ASSERT_TRUE(udf.ok()) << udf.status();
  Element element = MakeElement({Tensor::String("a"), Tensor::Scalar<int64_t>(1)});
  absl::Status status = (*udf)->Map(element, UdfCall{});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("parse_example: need an element of one string[] (a serialized "
                        "tf.train.Example), got 2 tensors: string[], int64[]"));
}

TEST(ParseExampleUdfTest, FactoryRejectsMismatchedDtypeCount) {
  absl::StatusOr<std::unique_ptr<Udf>> udf =
      MakeUdf(kParseExample, R"({"keys": ["a", "b"], "dtypes": ["int64"]})");
  EXPECT_EQ(udf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(udf.status().message(),
              HasSubstr("param 'dtypes' has 1 entries but keys has 2; give one dtype per key"));
}

TEST(ParseExampleUdfTest, FactoryRejectsUnknownDtype) {
  absl::StatusOr<std::unique_ptr<Udf>> udf =
      MakeUdf(kParseExample, R"({"keys": ["a", "b"], "dtypes": ["int64", "int32"]})");
  EXPECT_THAT(udf.status().message(),
              HasSubstr("param 'dtypes' entry 1 ('int32', for key 'b') is not one of bytes, "
                        "int64, float, bytes_list, int64_list, float_list"));
}

TEST(ParseExampleUdfTest, FactoryRejectsNoKeys) {
  absl::StatusOr<std::unique_ptr<Udf>> udf =
      MakeUdf(kParseExample, R"({"keys": [], "dtypes": []})");
  EXPECT_THAT(udf.status().message(), HasSubstr("param 'keys' must name at least one feature"));
}

TEST(ParseExampleUdfTest, FactoryRequiresKeysAndDtypes) {
  EXPECT_THAT(MakeUdf(kParseExample, R"({"keys": ["a"]})").status().message(),
              HasSubstr("missing required param 'dtypes'"));
}

}  // namespace
}  // namespace granary::udf_test
