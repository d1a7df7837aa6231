#include "client/trainer_tail_runner.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/local_runner.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "pipeline/trainer_tail.h"
#include "testing/scoped_temp_dir.h"
#include "tools/synthetic_imagenet.h"
#include "transport/element_image.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// The ResNet-style pipeline over `dir`'s TFRecords, its normalize per channel or not.
std::string ResnetPipeline(const std::string& dir, const std::string& normalize_params,
                           const std::string& after) {
  return absl::StrCat(R"({"source": {"type": "tfrecord", "params": {"files": [")", dir,
                      R"(/*.tfrecord"], "shuffle_splits": true}},
  "ops": [
    {"op": "shuffle", "params": {"buffer_size": 16}},
    {"op": "map", "udf": "parse_example",
     "udfParams": {"keys": ["image/encoded", "image/class/label"], "dtypes": ["bytes", "int64"]}},
    {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "decode_jpeg"},
    {"op": "map", "udf": "random_crop", "udfParams": {"fraction": 0.875}},
    {"op": "map", "udf": "random_flip"},
    {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "normalize",
     "udfParams": )",
                      normalize_params, "}", after, "]}");
}

// Every element of one epoch of `def`, as wire images.
std::vector<std::string> Epoch(const PipelineDef& def, int64_t epoch) {
  const PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline = Pipeline::Create(def, registries);
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  if (!pipeline.ok()) return {};
  absl::StatusOr<std::unique_ptr<Iterator>> it =
      MakeEpochIterator(**pipeline, /*seed=*/7, epoch, Env::Default(), std::nullopt);
  EXPECT_TRUE(it.ok()) << it.status();
  if (!it.ok()) return {};
  std::vector<std::string> images;
  while (true) {
    Element e;
    bool end = false;
    const absl::Status next = (*it)->GetNext(&e, &end);
    EXPECT_TRUE(next.ok()) << next;
    if (!next.ok() || end) break;
    std::string image;
    e.AppendImage(&image);
    images.push_back(std::move(image));
  }
  return images;
}

// The tensors of an image, compared by content (the framing's padding may differ).
std::vector<std::string> Contents(const std::string& image) {
  absl::StatusOr<ImageView> view = ParseImage(image);
  EXPECT_TRUE(view.ok()) << view.status();
  std::vector<std::string> out;
  if (!view.ok()) return out;
  for (const TensorView& t : view->tensors) {
    out.push_back(absl::StrCat(DataType_Name(t.dtype), "/", t.shape.size(), "/",
                               t.dtype == DT_STRING ? std::string() : std::string(t.content())));
  }
  out.push_back(absl::StrCat(view->split_id, "/", view->record));
  return out;
}

class TrainerTailRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticImagenetOptions data;
    data.out_dir = dir_.path();
    data.images = 24;
    data.files = 2;
    data.size = 20;
    ASSERT_TRUE(WriteSyntheticImagenet(Env::Default(), data).ok());
  }

  // Runs the full pipeline and the worker's split of it with the tail run here, for two epochs:
  // every element must be byte-identical.
  void ExpectSplitDeliversTheSameBytes(const std::string& json) {
    absl::StatusOr<PipelineDef> def = ParsePipelineJson(json, "test.json");
    ASSERT_TRUE(def.ok()) << def.status();
    absl::StatusOr<std::optional<TrainerTailSplit>> split =
        SplitTrainerTail(*def, PipelineRegistries::WithBuiltins());
    ASSERT_TRUE(split.ok()) << split.status();
    ASSERT_TRUE(split->has_value()) << json;
    absl::StatusOr<std::unique_ptr<TrainerTailRunner>> runner =
        TrainerTailRunner::Create((*split)->tail);
    ASSERT_TRUE(runner.ok()) << runner.status();
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      const std::vector<std::string> full = Epoch(*def, epoch);
      const std::vector<std::string> sent = Epoch((*split)->worker, epoch);
      ASSERT_EQ(full.size(), sent.size());
      ASSERT_FALSE(full.empty());
      for (size_t i = 0; i < full.size(); ++i) {
        // What the worker sent is smaller: uint8 images.
        EXPECT_LT(sent[i].size() * 3, full[i].size()) << "element " << i;
        absl::StatusOr<BufferRef> tailed = (*runner)->Run(sent[i], BufferPool::Default());
        ASSERT_TRUE(tailed.ok()) << tailed.status();
        EXPECT_EQ(Contents(std::string((*tailed)->bytes())), Contents(full[i]))
            << "epoch " << epoch << " element " << i << " of " << json;
      }
    }
  }

  testing::ScopedTempDir dir_;
};

TEST_F(TrainerTailRunnerTest, BatchesAreByteIdenticalToTheWorkersWithPerChannelMeanAndStd) {
  ExpectSplitDeliversTheSameBytes(ResnetPipeline(
      dir_.path(), R"({"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]})",
      R"(, {"op": "batch", "params": {"batch_size": 5}},
          {"op": "prefetch", "params": {"buffer_size": 2}})"));
}

TEST_F(TrainerTailRunnerTest, ImagesAreByteIdenticalUnbatchedAndWithTwoSteps) {
  ExpectSplitDeliversTheSameBytes(
      ResnetPipeline(dir_.path(), R"({"mean": [0.5], "std": [0.25]})",
                     R"(, {"op": "map", "udf": "normalize", "udfParams": {"scale": 3.0}})"));
}

// Channel counts the vector path does not serve (5) go through the tables; a float32 input is
// normalized in place: both must match the UDF on every value.
TEST(TrainerTailRunnerUnitTest, FloatInputAndChannelsOutsideTheVectorPathMatchTheKernelUdf) {
  std::mt19937 random(11);
  for (const DataType dtype : {DT_UINT8, DT_FLOAT}) {
    const std::vector<int64_t> shape = {2, 3, 4, 5};
    Tensor image = Tensor::Uninitialized(dtype, shape);
    for (int64_t i = 0; i < image.num_elements(); ++i) {
      if (dtype == DT_UINT8) {
        image.data<uint8_t>()[i] = static_cast<uint8_t>(random());
      } else {
        image.data<float>()[i] = static_cast<float>(random() % 1000) / 7.0f;
      }
    }
    Element element;
    element.tensors = {image, Tensor::String("label"), Tensor::Scalar<int64_t>(42)};
    element.split_id = 3;
    element.record = 9;
    std::string sent;
    element.AppendImage(&sent);
    TrainerTailDef def;
    def.set_batch_dims(1);
    TrainerTailDef::Normalize* n = def.add_steps()->mutable_normalize();
    n->set_scale(0.5f);
    for (float m : {1.0f, 2.0f, 3.0f, 4.0f, 5.0f}) n->add_mean(m);
    n->add_std(3.0f);
    absl::StatusOr<std::unique_ptr<TrainerTailRunner>> runner = TrainerTailRunner::Create(def);
    ASSERT_TRUE(runner.ok()) << runner.status();
    absl::StatusOr<BufferRef> out = (*runner)->Run(sent, BufferPool::Default());
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<ImageView> view = ParseImage((*out)->bytes());
    ASSERT_TRUE(view.ok()) << view.status();
    ASSERT_EQ(view->tensors.size(), 3u);
    EXPECT_EQ(view->tensors[0].dtype, DT_FLOAT);
    EXPECT_EQ(view->tensors[0].shape, shape);
    EXPECT_EQ(view->split_id, 3u);
    EXPECT_EQ(view->record, 9);
    for (int64_t i = 0; i < image.num_elements(); ++i) {
      const float x = dtype == DT_UINT8 ? image.data<uint8_t>()[i] : image.data<float>()[i];
      const float want = (x * 0.5f - static_cast<float>(i % 5 + 1)) / 3.0f;
      ASSERT_EQ(view->tensors[0].values<float>()[i], want) << DataType_Name(dtype) << " " << i;
    }
    EXPECT_EQ(view->tensors[1].strings[0], "label");
    EXPECT_EQ(*view->tensors[2].values<int64_t>(), 42);
  }
}

TEST(TrainerTailRunnerUnitTest, ElementsTheUdfWouldRefuseAreRefusedNamingTheOpAndTheElement) {
  TrainerTailDef def;
  def.set_batch_dims(1);
  TrainerTailDef::Step* step = def.add_steps();
  step->set_label("op 6 (parallel_map, udf 'normalize')");
  step->mutable_normalize()->set_scale(1.0f);
  step->mutable_normalize()->add_mean(0.0f);
  for (float s : {1.0f, 1.0f, 1.0f}) step->mutable_normalize()->add_std(s);
  absl::StatusOr<std::unique_ptr<TrainerTailRunner>> runner = TrainerTailRunner::Create(def);
  ASSERT_TRUE(runner.ok()) << runner.status();
  const auto error = [&](std::vector<Tensor> tensors) {
    Element element;
    element.tensors = std::move(tensors);
    element.split_id = 4;
    element.record = 17;
    std::string sent;
    element.AppendImage(&sent);
    return (*runner)->Run(sent, BufferPool::Default()).status();
  };
  const absl::Status unbatched = error({Tensor(DT_UINT8, {4, 4, 3})});
  EXPECT_EQ(unbatched.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unbatched.message(), HasSubstr("op 6 (parallel_map, udf 'normalize')"));
  EXPECT_THAT(unbatched.message(), HasSubstr("split 4 record 17"));
  EXPECT_THAT(unbatched.message(), HasSubstr("need a uint8 or float32 batch of images"));
  EXPECT_THAT(error({Tensor(DT_INT32, {2, 4, 4, 3})}).message(), HasSubstr("DT_INT32"));
  EXPECT_THAT(error({Tensor(DT_UINT8, {2, 4, 4, 4})}).message(),
              HasSubstr("has 4 channels; mean has 1 values and std 3"));
  EXPECT_THAT(error({}).message(), HasSubstr("no tensor 0 (it has 0)"));
  EXPECT_EQ((*runner)->Run("\xff\xff", BufferPool::Default()).status().code(),
            absl::StatusCode::kDataLoss);
  // Two batch ops after the tail: a batch of batches.
  TrainerTailDef twice = def;
  twice.set_batch_dims(2);
  absl::StatusOr<std::unique_ptr<TrainerTailRunner>> nested = TrainerTailRunner::Create(twice);
  ASSERT_TRUE(nested.ok()) << nested.status();
  Element batches;
  batches.tensors = {Tensor(DT_UINT8, {2, 2, 4, 4, 3})};
  std::string sent;
  batches.AppendImage(&sent);
  EXPECT_TRUE((*nested)->Run(sent, BufferPool::Default()).ok());
  EXPECT_THAT(error({Tensor(DT_UINT8, {2, 2, 4, 4, 3})}).message(),
              HasSubstr("need a uint8 or float32 batch of images [n, height, width, channels]"));
}

TEST(TrainerTailRunnerUnitTest, ATailThisClientCannotRunIsRefusedNamingTheStep) {
  TrainerTailDef def;
  def.add_steps()->set_label("op 2 (map, udf 'mystery')");
  EXPECT_THAT(TrainerTailRunner::Create(def).status().message(),
              HasSubstr("op 2 (map, udf 'mystery'): not a normalize step"));
  TrainerTailDef zero;
  TrainerTailDef::Step* step = zero.add_steps();
  step->set_label("op 3 (map, udf 'normalize')");
  step->mutable_normalize()->add_mean(0.0f);
  step->mutable_normalize()->add_std(0.0f);
  EXPECT_THAT(TrainerTailRunner::Create(zero).status().message(), HasSubstr("a std entry is 0"));
  // A worker's answer cannot make this client build huge tables or run endless steps.
  TrainerTailDef wide;
  TrainerTailDef::Normalize* n = wide.add_steps()->mutable_normalize();
  n->add_std(1.0f);
  for (int i = 0; i < 1025; ++i) n->add_mean(0.0f);
  EXPECT_THAT(TrainerTailRunner::Create(wide).status().message(),
              HasSubstr("at most 1024 values"));
  TrainerTailDef many;
  for (int i = 0; i < 65; ++i) {
    TrainerTailDef::Normalize* step = many.add_steps()->mutable_normalize();
    step->add_mean(0.0f);
    step->add_std(1.0f);
  }
  EXPECT_THAT(TrainerTailRunner::Create(many).status().message(), HasSubstr("65 steps (at most 64)"));
}

}  // namespace
}  // namespace granary
