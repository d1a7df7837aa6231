#include "pipeline/trainer_tail.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/kernels/normalize_kernel.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "pipeline/spec/pipeline_spec.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::Pointwise;

// The ResNet-style pipeline's ops after the source, as JSON, with `tail` where its normalize was.
std::string Pipeline(const std::string& ops) {
  return R"({"source": {"type": "tfrecord", "params": {"files": ["/data/*.tfrecord"]}},
             "ops": [)" +
         ops + "]}";
}

constexpr char kHead[] = R"(
  {"op": "map", "udf": "parse_example",
   "udfParams": {"keys": ["image/encoded", "image/class/label"], "dtypes": ["bytes", "int64"]}},
  {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "decode_jpeg"},
  {"op": "map", "udf": "random_crop", "udfParams": {"fraction": 0.875}},
  {"op": "map", "udf": "random_flip"},)";

PipelineDef Parse(const std::string& json) {
  absl::StatusOr<PipelineDef> def = ParsePipelineJson(json, "trainer_tail_test.json");
  EXPECT_TRUE(def.ok()) << def.status();
  return def.value_or(PipelineDef());
}

std::optional<TrainerTailSplit> Split(const std::string& json) {
  const absl::StatusOr<std::optional<TrainerTailSplit>> split =
      SplitTrainerTail(Parse(json), PipelineRegistries::WithBuiltins());
  EXPECT_TRUE(split.ok()) << split.status();
  return split.ok() ? *split : std::nullopt;
}

TEST(TrainerTailTest, TheLastNormalizeBeforeBatchAndPrefetchIsTheTailWithItsParamsResolved) {
  const std::optional<TrainerTailSplit> split = Split(Pipeline(std::string(kHead) + R"(
      {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "normalize",
       "udfParams": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}},
      {"op": "batch", "params": {"batch_size": 32}},
      {"op": "prefetch", "params": {"buffer_size": 2}})"));
  ASSERT_TRUE(split.has_value());
  ASSERT_EQ(split->tail.steps_size(), 1);
  EXPECT_EQ(split->tail.batch_dims(), 1);
  const TrainerTailDef::Step& step = split->tail.steps(0);
  EXPECT_EQ(step.label(), "op 4 (parallel_map, udf 'normalize')");
  EXPECT_EQ(step.normalize().index(), 0);
  EXPECT_FLOAT_EQ(step.normalize().scale(), 1.0f / 255);
  EXPECT_THAT(step.normalize().mean(), Pointwise(FloatEq(), {0.485f, 0.456f, 0.406f}));
  EXPECT_THAT(step.normalize().std(), Pointwise(FloatEq(), {0.229f, 0.224f, 0.225f}));

  // The worker's pipeline: the same without normalize; batch and prefetch keep their indices.
  const PipelineDef& worker = split->worker;
  ASSERT_EQ(worker.ops_size(), 6);
  EXPECT_EQ(worker.ops(3).udf(), "random_flip");
  EXPECT_FALSE(worker.ops(3).has_original_index());
  // The map before the parallel normalize takes its threads: the fused stage keeps them.
  EXPECT_EQ(worker.ops(3).op(), "parallel_map");
  EXPECT_EQ(worker.ops(3).params().fields().at("num_threads").number_value(), 2);
  EXPECT_EQ(worker.ops(4).op(), "batch");
  EXPECT_EQ(worker.ops(4).original_index(), 5);
  EXPECT_EQ(worker.ops(5).op(), "prefetch");
  EXPECT_EQ(worker.ops(5).original_index(), 6);
  const PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  const absl::StatusOr<PipelineSpec> spec = PipelineSpec::Create(worker, registries);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ops()[4].label, "op 5 (batch)");
}

TEST(TrainerTailTest, SeveralNormalizesAtTheEndOfAnUnbatchedPipelineAreOneTailInOrder) {
  const std::optional<TrainerTailSplit> split = Split(Pipeline(std::string(kHead) + R"(
      {"op": "map", "udf": "normalize", "udfParams": {"scale": 1.0}},
      {"op": "map", "udf": "normalize", "udfParams": {"mean": [0.5], "std": [2]}})"));
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->tail.batch_dims(), 0);
  ASSERT_EQ(split->tail.steps_size(), 2);
  EXPECT_FLOAT_EQ(split->tail.steps(0).normalize().scale(), 1.0f);
  EXPECT_THAT(split->tail.steps(0).normalize().mean(), ElementsAre(0.0f));
  EXPECT_THAT(split->tail.steps(1).normalize().std(), ElementsAre(2.0f));
  EXPECT_EQ(split->worker.ops_size(), 4);
}

TEST(TrainerTailTest, APipelineWhoseNormalizeIsNotLastHasNone) {
  // An op that is neither batch nor prefetch after normalize: it must see normalized values.
  EXPECT_FALSE(Split(Pipeline(R"(
      {"op": "map", "udf": "parse_example",
       "udfParams": {"keys": ["image/encoded"], "dtypes": ["bytes"]}},
      {"op": "map", "udf": "decode_jpeg"},
      {"op": "map", "udf": "normalize"},
      {"op": "map", "udf": "random_flip"},
      {"op": "batch", "params": {"batch_size": 4}})"))
                   .has_value());
  // No normalize at all.
  EXPECT_FALSE(Split(Pipeline(std::string(kHead) + R"(
      {"op": "batch", "params": {"batch_size": 4}})"))
                   .has_value());
}

TEST(TrainerTailTest, EachBatchOpAfterTheTailIsABatchDimension) {
  const std::optional<TrainerTailSplit> split = Split(Pipeline(std::string(kHead) + R"(
      {"op": "map", "udf": "normalize"},
      {"op": "batch", "params": {"batch_size": 4}},
      {"op": "prefetch", "params": {"buffer_size": 2}},
      {"op": "batch", "params": {"batch_size": 2}})"));
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->tail.batch_dims(), 2);
  // A plain map before a plain map normalize stays a map.
  EXPECT_EQ(split->worker.ops(3).op(), "map");
}

TEST(TrainerTailTest, ATailWiderThanAClientRunsStaysOnTheWorker) {
  std::string mean = "[0";
  for (int i = 1; i < kMaxTrainerTailChannelValues + 1; ++i) mean += ", 0";
  mean += "]";
  EXPECT_FALSE(Split(Pipeline(std::string(kHead) + R"(
      {"op": "map", "udf": "normalize", "udfParams": {"mean": )" +
                              mean + R"(}},
      {"op": "batch", "params": {"batch_size": 4}})"))
                   .has_value());
}

TEST(TrainerTailTest, APipelineThatReadsTheCacheHasNone) {
  PipelineDef def = Parse(Pipeline(std::string(kHead) + R"(
      {"op": "map", "udf": "normalize"},
      {"op": "batch", "params": {"batch_size": 4}})"));
  // What the dispatcher makes of it for a Get epoch: ops of the user's pipeline stand in for.
  def.set_cached_ops(2);
  def.mutable_ops()->DeleteSubrange(0, 2);
  const absl::StatusOr<std::optional<TrainerTailSplit>> split =
      SplitTrainerTail(def, PipelineRegistries::WithBuiltins());
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_FALSE(split->has_value());
}

}  // namespace
}  // namespace granary
