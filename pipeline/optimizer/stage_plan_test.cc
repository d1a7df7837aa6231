// Tests of the stage plan's passes (stage_plan.h) on ops made of traits alone, and of the
// decode-crop pass on the built-in UDFs.
#include "pipeline/optimizer/stage_plan.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/udfs/builtin_udfs.h"
#include "pipeline/udfs/udf_test_util.h"

namespace granary {
namespace {

using ::testing::ElementsAre;

// Ops with the traits of map, parallel_map (its thread count in param "n"), batch and another.
struct Ops {
  Ops() {
    map.maps_elements = true;
    parallel.maps_elements = true;
    parallel.threads = [](const Params& params) -> absl::StatusOr<int> {
      return static_cast<int>(params.GetInt("n"));
    };
    batch.placed_batch_size = [](const Params&) -> int64_t { return 8; };
  }
  OpInfo map, parallel, batch, other;
};

Params ThreadParams(int n) {
  google::protobuf::Struct values;
  (*values.mutable_fields())["n"].set_number_value(n);
  return *Params::Create(values, {{"n", ParamType::kInt}}, "test");
}

TEST(StagePlanTest, FuseMapRunsMakesOneStagePerRunOfMaps) {
  Ops o;
  const Params none;
  const std::vector<PlannedOp> ops = {
      {&o.map, &none}, {&o.parallel, &none}, {&o.other, &none}, {&o.map, &none}};
  const std::vector<Stage> stages = FuseMapRuns(ops, /*fuse_maps=*/true);
  ASSERT_EQ(stages.size(), 3);
  EXPECT_TRUE(stages[0].fused);
  EXPECT_EQ(stages[0].first_op, 0);
  EXPECT_EQ(stages[0].num_ops, 2);
  EXPECT_FALSE(stages[1].fused);
  EXPECT_EQ(stages[1].first_op, 2);
  EXPECT_TRUE(stages[2].fused);
  EXPECT_EQ(stages[2].first_op, 3);
  EXPECT_EQ(stages[2].num_ops, 1);
}

TEST(StagePlanTest, WithoutFusionEveryOpIsItsOwnUnfusedStage) {
  Ops o;
  const Params none;
  const std::vector<Stage> stages =
      FuseMapRuns({{&o.map, &none}, {&o.parallel, &none}}, /*fuse_maps=*/false);
  ASSERT_EQ(stages.size(), 2);
  EXPECT_FALSE(stages[0].fused);
  EXPECT_FALSE(stages[1].fused);
}

TEST(StagePlanTest, AFusedStageRunsOnTheLargestThreadCountOfItsOps) {
  Ops o;
  const Params two = ThreadParams(2), four = ThreadParams(4), none;
  const std::vector<PlannedOp> ops = {{&o.parallel, &two}, {&o.map, &none}, {&o.parallel, &four}};
  absl::StatusOr<std::vector<Stage>> stages = PlanStages(ops, {});
  ASSERT_TRUE(stages.ok()) << stages.status();
  ASSERT_EQ(stages->size(), 1);
  EXPECT_EQ((*stages)[0].num_threads, 4);
  EXPECT_FALSE((*stages)[0].tuned);
}

TEST(StagePlanTest, AThreadCountOfZeroMakesTheStageTuned) {
  Ops o;
  const Params zero = ThreadParams(0);
  absl::StatusOr<std::vector<Stage>> stages = PlanStages({{&o.parallel, &zero}}, {});
  ASSERT_TRUE(stages.ok()) << stages.status();
  EXPECT_EQ((*stages)[0].num_threads, 0);
  EXPECT_TRUE((*stages)[0].tuned);
}

TEST(StagePlanTest, EveryMapStagePlacesTheBatchAfterIt) {
  Ops o;
  const Params two = ThreadParams(2), zero = ThreadParams(0), none;
  const auto places = [&](const PlannedOp& mapper) {
    absl::StatusOr<std::vector<Stage>> stages = PlanStages({mapper, {&o.batch, &none}}, {});
    EXPECT_TRUE(stages.ok()) << stages.status();
    return (*stages)[0].places_next_batch;
  };
  EXPECT_TRUE(places({&o.parallel, &two}));
  EXPECT_TRUE(places({&o.parallel, &zero}));  // Tuned: at least one thread.
  // On the calling thread too: rows its UDFs make in place spare the batch op a copy.
  EXPECT_TRUE(places({&o.map, &none}));
  EXPECT_FALSE(places({&o.other, &none}));
}

TEST(StagePlanTest, ADecodeFusesWithTheCropRightAfterIt) {
  using udf_test::MakeUdf;
  Ops o;
  const Params none;
  const std::unique_ptr<Udf> decode = *MakeUdf({RegisterDecodeImageUdfs, "decode_jpeg"});
  const std::unique_ptr<Udf> crop =
      *MakeUdf({RegisterRandomCropUdf, "random_crop"}, R"({"fraction": 0.5})");
  const std::unique_ptr<Udf> flip = *MakeUdf({RegisterRandomFlipUdf, "random_flip"});
  const std::vector<PlannedOp> ops = {{&o.map, &none, decode.get()},
                                      {&o.map, &none, crop.get()},
                                      {&o.map, &none, crop.get()},
                                      {&o.map, &none, decode.get()},
                                      {&o.map, &none, flip.get()}};
  absl::StatusOr<std::vector<Stage>> fused = PlanStages(ops, {});
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_THAT((*fused)[0].decode_crop_with_next, ElementsAre(true, false, false, false, false));

  absl::StatusOr<std::vector<Stage>> unfused = PlanStages(ops, {.fuse_decode_crop = false});
  ASSERT_TRUE(unfused.ok()) << unfused.status();
  EXPECT_THAT((*unfused)[0].decode_crop_with_next, ElementsAre(false, false, false, false, false));
}

}  // namespace
}  // namespace granary
