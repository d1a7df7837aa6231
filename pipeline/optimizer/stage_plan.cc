#include "pipeline/optimizer/stage_plan.h"

#include <algorithm>

#include "common/status_macros.h"
#include "pipeline/udfs/decode_crop_fusion.h"

namespace granary {

std::vector<Stage> FuseMapRuns(const std::vector<PlannedOp>& ops, bool fuse_maps) {
  const int size = static_cast<int>(ops.size());
  const auto maps = [&](int i) { return fuse_maps && i < size && ops[i].info->maps_elements; };
  std::vector<Stage> stages;
  for (int i = 0; i < size;) {
    Stage stage;
    stage.first_op = i;
    stage.fused = maps(i);
    if (stage.fused) {
      while (maps(i)) ++i;
      stage.num_ops = i - stage.first_op;
      stage.decode_crop_with_next.assign(stage.num_ops, false);
    } else {
      ++i;
    }
    stages.push_back(std::move(stage));
  }
  return stages;
}

absl::Status SetStageThreads(const std::vector<PlannedOp>& ops, std::vector<Stage>& stages) {
  for (Stage& stage : stages) {
    if (!stage.fused) continue;
    for (int i = stage.first_op; i < stage.first_op + stage.num_ops; ++i) {
      if (!ops[i].info->threads) continue;
      ASSIGN_OR_RETURN(const int threads, ops[i].info->threads(*ops[i].params));
      stage.tuned = stage.tuned || threads == 0;
      stage.num_threads = std::max(stage.num_threads, threads);
    }
  }
  return absl::OkStatus();
}

void FuseDecodeCrops(const std::vector<PlannedOp>& ops, std::vector<Stage>& stages) {
  for (Stage& stage : stages) {
    if (!stage.fused) continue;
    for (int k = 0; k + 1 < stage.num_ops; ++k) {
      const Udf* decode = ops[stage.first_op + k].udf;
      const Udf* crop = ops[stage.first_op + k + 1].udf;
      if (decode != nullptr && crop != nullptr && FusesDecodeCrop(*decode, *crop)) {
        stage.decode_crop_with_next[k] = true;
        ++k;  // A crop fuses with one decode only.
      }
    }
  }
}

void PlaceBatches(const std::vector<PlannedOp>& ops, std::vector<Stage>& stages) {
  for (size_t s = 0; s + 1 < stages.size(); ++s) {
    const Stage& next = stages[s + 1];
    stages[s].places_next_batch = stages[s].fused && !next.fused &&
                                  ops[next.first_op].info->placed_batch_size != nullptr;
  }
}

absl::StatusOr<std::vector<Stage>> PlanStages(const std::vector<PlannedOp>& ops,
                                              const StagePlanOptions& options) {
  std::vector<Stage> stages = FuseMapRuns(ops, options.fuse_maps);
  RETURN_IF_ERROR(SetStageThreads(ops, stages));
  if (options.fuse_decode_crop) FuseDecodeCrops(ops, stages);
  PlaceBatches(ops, stages);
  return stages;
}

}  // namespace granary
