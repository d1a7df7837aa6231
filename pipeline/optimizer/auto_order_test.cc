// Tests of AutoOrder (auto_order.h): every pair the rule lets swap gives byte-identical outputs
// on random images and keys (seed in the failure messages), forbidden pairs never swap,
// keep_position ops never move, and a reordered pipeline's epochs have the original's digests.
#include "pipeline/optimizer/auto_order.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/pipeline.h"
#include "pipeline/pipeline_loader.h"
#include "tools/synthetic_imagenet.h"
#include "pipeline/udfs/udf_test_util.h"
#include "testing/scoped_temp_dir.h"
#include "tests/in_process_digest.h"

namespace granary {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using udf_test::ApplyUdf;
using udf_test::RegisteredUdf;

OpDef MapOp(const std::string& udf, const std::string& params = "{}") {
  OpDef op;
  op.set_op("map");
  op.set_udf(udf);
  *op.mutable_udf_params() = udf_test::Json(params);
  return op;
}

TEST(AutoOrderCommuteTest, PixelwiseAndPixelSelectingSwapWithoutChangingAByte) {
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const RegisteredUdf normalize = {RegisterNormalizeUdf, "normalize"};
  const std::string normalize_params = R"({"mean": [0.485, 0.456, 0.406],
                                           "std": [0.229, 0.224, 0.225]})";
  const std::vector<std::pair<RegisteredUdf, std::string>> selectors = {
      {{RegisterRandomCropUdf, "random_crop"}, R"({"height": 7, "width": 5})"},
      {{RegisterRandomCropUdf, "random_crop"}, R"({"fraction": 0.5})"},
      {{RegisterRandomFlipUdf, "random_flip"}, "{}"},
  };
  for (int i = 0; i < 60; ++i) {
    const int64_t h = std::uniform_int_distribution<int64_t>(7, 40)(rng);
    const int64_t w = std::uniform_int_distribution<int64_t>(5, 40)(rng);
    Tensor image(DT_UINT8, {h, w, 3});
    for (int64_t k = 0; k < image.num_elements(); ++k) {
      image.data<uint8_t>()[k] = static_cast<uint8_t>(rng());
    }
    const auto& [selector, params] = selectors[i % selectors.size()];
    const uint64_t key = rng();
    const Tensor map_then_select =
        ApplyUdf(selector, params, ApplyUdf(normalize, normalize_params, image), key);
    const Tensor select_then_map =
        ApplyUdf(normalize, normalize_params, ApplyUdf(selector, params, image, key));
    ASSERT_TRUE(map_then_select == select_then_map)
        << "seed " << seed << " case " << i << ": " << selector.name << " " << params;
  }
}

TEST(AutoOrderCommuteTest, OnlyPixelwiseNextToPixelSelectingOnOneTensorCommutes) {
  const PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  const OpDef normalize = MapOp("normalize");
  const OpDef crop = MapOp("random_crop", R"({"fraction": 0.5})");
  EXPECT_TRUE(Commute(normalize, crop, registries));
  EXPECT_TRUE(Commute(crop, normalize, registries));
  EXPECT_TRUE(Commute(normalize, MapOp("random_flip"), registries));
  // Interpolation does not commute with normalize's rounding; two selectors choose differently
  // in either order; decoders, casts and unknown UDFs stay.
  EXPECT_FALSE(Commute(normalize, MapOp("resize", R"({"height": 4, "width": 4})"), registries));
  EXPECT_FALSE(
      Commute(normalize, MapOp("random_resized_crop", R"({"height": 4, "width": 4})"), registries));
  EXPECT_FALSE(Commute(crop, MapOp("random_flip"), registries));
  EXPECT_FALSE(Commute(MapOp("decode_jpeg"), crop, registries));
  EXPECT_FALSE(Commute(MapOp("cast", R"({"dtype": "float32"})"), crop, registries));
  EXPECT_FALSE(Commute(MapOp("no_such_udf"), crop, registries));
  // Another tensor, keep_position, or not both map ops.
  EXPECT_FALSE(Commute(normalize, MapOp("random_crop", R"({"fraction": 0.5, "index": 1})"), registries));
  OpDef pinned = normalize;
  pinned.set_keep_position(true);
  EXPECT_FALSE(Commute(pinned, crop, registries));
  OpDef filter = crop;
  filter.set_op("filter");
  EXPECT_FALSE(Commute(normalize, filter, registries));
}

class AutoOrderPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticImagenetOptions data;
    data.out_dir = dir_.Join("data");
    data.images = 24;
    data.files = 2;
    data.size = 64;
    ASSERT_TRUE(WriteSyntheticImagenet(Env::Default(), data).ok());
  }

  // The ResNet-style pipeline with its augmentation ops in `order`.
  PipelineDef Resnet(const std::vector<std::string>& order) {
    std::string ops;
    for (const std::string& op : order) {
      if (op == "normalize") {
        ops += R"({"op": "map", "udf": "normalize", "udfParams": {"mean": [0.5, 0.5, 0.5],
                   "std": [0.25, 0.25, 0.25]}},)";
      } else if (op == "crop") {
        ops += R"({"op": "parallel_map", "params": {"num_threads": 2}, "udf": "random_crop",
                   "udfParams": {"height": 32, "width": 32}},)";
      } else if (op == "flip") {
        ops += R"({"op": "map", "udf": "random_flip"},)";
      }
    }
    const std::string json =
        absl::StrCat(R"({"source": {"type": "tfrecord", "params": {"files": [")", dir_.Join("data"),
                     R"(/*.tfrecord"]}}, "ops": [
          {"op": "map", "udf": "parse_example", "udfParams": {"keys": ["image/encoded"],
           "dtypes": ["bytes"]}},
          {"op": "map", "udf": "decode_jpeg"},)",
                     ops, R"({"op": "batch", "params": {"batch_size": 4}}]})");
    absl::StatusOr<PipelineDef> def = ParsePipelineJson(json, "test");
    EXPECT_TRUE(def.ok()) << def.status();
    return def.ok() ? *def : PipelineDef();
  }

  std::vector<std::string> Udfs(const PipelineDef& def) {
    std::vector<std::string> udfs;
    for (const OpDef& op : def.ops()) udfs.push_back(op.udf().empty() ? op.op() : op.udf());
    return udfs;
  }

  testing::ScopedTempDir dir_;
  const PipelineRegistries registries_ = PipelineRegistries::WithBuiltins();
};

TEST_F(AutoOrderPipelineTest, MovesTheCropAndFlipBeforeNormalizeWithTheSameDigests) {
  const PipelineDef poor = Resnet({"normalize", "crop", "flip"});
  absl::StatusOr<std::vector<OpProfile>> profile = ProfileOps(poor, registries_, Env::Default());
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_NEAR((*profile)[2].inflation, 4.0, 0.01) << "normalize: uint8 to float32";
  EXPECT_NEAR((*profile)[3].inflation, 0.25, 0.01) << "a 32x32 crop of 64x64";
  EXPECT_NEAR((*profile)[4].inflation, 1.0, 0.01) << "flip";
  const PipelineDef reordered = Reorder(poor, registries_, *profile);
  EXPECT_THAT(Udfs(reordered), ::testing::ElementsAre("parse_example", "decode_jpeg", "random_crop",
                                                      "random_flip", "normalize", "batch"));
  // The moved ops keep their indices (random keys, labels); the others have none.
  EXPECT_EQ(reordered.ops(2).original_index(), 3);
  EXPECT_EQ(reordered.ops(3).original_index(), 4);
  EXPECT_EQ(reordered.ops(4).original_index(), 2);
  EXPECT_FALSE(reordered.ops(0).has_original_index());
  EXPECT_FALSE(reordered.ops(5).has_original_index());
  for (const auto& [seed, epoch] : std::vector<std::pair<uint64_t, int64_t>>{{1, 0}, {7, 3}}) {
    const auto original = testing::DigestInProcess(poor, seed, epoch);
    const auto moved = testing::DigestInProcess(reordered, seed, epoch);
    EXPECT_EQ(moved.rows, original.rows);
    EXPECT_EQ(moved.multiset, original.multiset) << "seed " << seed << " epoch " << epoch;
  }
  // AutoOrder is ProfileOps then Reorder.
  absl::StatusOr<PipelineDef> automatic = AutoOrder(poor, registries_, Env::Default());
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(Udfs(*automatic), Udfs(reordered));
}

TEST_F(AutoOrderPipelineTest, AGoodOrderAndPinnedOpsStay) {
  const PipelineDef good = Resnet({"crop", "flip", "normalize"});
  absl::StatusOr<PipelineDef> same = AutoOrder(good, registries_, Env::Default());
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*same, good));
  PipelineDef pinned = Resnet({"normalize", "crop", "flip"});
  pinned.mutable_ops(2)->set_keep_position(true);
  absl::StatusOr<PipelineDef> kept = AutoOrder(pinned, registries_, Env::Default());
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*kept, pinned));
}

TEST_F(AutoOrderPipelineTest, AnOriginalIndexOutOfRangeIsRefused) {
  PipelineDef bad = Resnet({"crop"});
  bad.mutable_ops(2)->set_original_index(-1);
  EXPECT_THAT(Pipeline::Create(bad, registries_).status().message(),
              ::testing::HasSubstr("original_index -1 is outside"));
}

}  // namespace
}  // namespace granary
