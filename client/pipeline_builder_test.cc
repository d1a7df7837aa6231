#include <string>

#include "common/deterministic_serialization.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "granary/client.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

PipelineDef FromJson(const std::string& json) {
  PipelineDef def;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &def);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return def;
}

void ExpectEquivalent(const PipelineDef& built, const std::string& json) {
  const PipelineDef expected = FromJson(json);
  std::string diff;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(built, expected)) << diff;
  // Byte for byte, so that both register as the same dataset (same fingerprint).
  EXPECT_EQ(SerializeDeterministically(built), SerializeDeterministically(expected));
}

TEST(PipelineBuilderTest, RangeWithEveryOp) {
  const PipelineDef built = PipelineBuilder::Range(1000, {{"elements_per_split", 10}})
                                .Shuffle(64)
                                .Map("add", {{"value", 3}})
                                .ParallelMap("modulo", 2, {{"divisor", 7}})
                                .Filter("non_empty")
                                .Skip(5)
                                .Take(900)
                                .Mark("decoded")
                                .Batch(32)
                                .Prefetch()
                                .Build();
  ExpectEquivalent(built, R"({
    "source": {"type": "range", "params": {"stop": 1000, "elements_per_split": 10}},
    "ops": [
      {"op": "shuffle", "params": {"buffer_size": 64}},
      {"op": "map", "udf": "add", "udfParams": {"value": 3}},
      {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "modulo",
       "udfParams": {"divisor": 7}},
      {"op": "filter", "udf": "non_empty"},
      {"op": "skip", "params": {"count": 5}},
      {"op": "take", "params": {"count": 900}},
      {"op": "mark", "params": {"name": "decoded"}},
      {"op": "batch", "params": {"batch_size": 32}},
      {"op": "prefetch", "params": {"buffer_size": 2}}
    ]})");
}

TEST(PipelineBuilderTest, TfRecordImageNetStyleWithEveryParamKind) {
  const PipelineDef built =
      PipelineBuilder::TfRecord({"/data/a-*.tfrecord", "/data/b.tfrecord"},
                                {{"shuffle_splits", true}})
          .ParallelMap("parse_example", 4,
                       {{"keys", std::vector<std::string>{"image/encoded", "image/class/label"}},
                        {"dtypes", std::vector<std::string>{"bytes", "int64"}}})
          .Map("random_crop", {{"fraction", 0.875}, {"size", std::vector<int64_t>{224, 224}}})
          .Map("normalize", {{"mean", std::vector<double>{0.485, 0.456, 0.406}},
                             {"std", std::vector<double>{0.229, 0.224, 0.225}},
                             {"dtype", std::string("float32")}})
          .Batch(128, /*drop_remainder=*/true)
          .Prefetch(4)
          .Build();
  ExpectEquivalent(built, R"({
    "source": {"type": "tfrecord",
               "params": {"files": ["/data/a-*.tfrecord", "/data/b.tfrecord"],
                          "shuffle_splits": true}},
    "ops": [
      {"op": "parallel_map", "params": {"num_threads": 4}, "udf": "parse_example",
       "udfParams": {"keys": ["image/encoded", "image/class/label"],
                     "dtypes": ["bytes", "int64"]}},
      {"op": "map", "udf": "random_crop", "udfParams": {"fraction": 0.875, "size": [224, 224]}},
      {"op": "map", "udf": "normalize",
       "udfParams": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225],
                     "dtype": "float32"}},
      {"op": "batch", "params": {"batch_size": 128, "drop_remainder": true}},
      {"op": "prefetch", "params": {"buffer_size": 4}}
    ]})");
}

TEST(PipelineBuilderTest, TextLinesAndFromDefAppends) {
  const PipelineDef base = PipelineBuilder::TextLines({"/data/lines.txt.gz"}).Build();
  ExpectEquivalent(base, R"({"source": {"type": "text_lines",
                                        "params": {"files": ["/data/lines.txt.gz"]}}})");
  const PipelineDef extended = PipelineBuilder::FromDef(base).Map("string_length").Build();
  ExpectEquivalent(extended, R"({"source": {"type": "text_lines",
                                            "params": {"files": ["/data/lines.txt.gz"]}},
                                 "ops": [{"op": "map", "udf": "string_length"}]})");
}

}  // namespace
}  // namespace granary
