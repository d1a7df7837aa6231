// The stage plan: how Pipeline::MakeIterator turns a compiled pipeline's ops into the links of
// its iterator chain. Optimizer passes, each driven by op traits (OpInfo in pipeline/core/op.h),
// rewrite a plan that starts as one stage per op:
//   FuseMapRuns      each maximal run of ops that map elements alone (maps_elements) becomes one
//                    fused stage, so an element crosses threads once per run (op.h, map fusion);
//   SetStageThreads  a fused stage runs on the largest thread count of its ops (`threads`), and
//                    is tuned when one of them asks for 0;
//   FuseDecodeCrops  within a fused stage, an op whose UDF decodes what the next op's UDF crops
//                    runs with it as one partial decode (pipeline/udfs/decode_crop_fusion.h);
//   PlaceBatches     a parallel fused stage right before an op that takes a batch placement
//                    (`placed_batch_size`) places its rows into their batch on its threads.
// The output of the pipeline is the same with or without any of them; only where the work runs
// changes.
#ifndef GRANARY_PIPELINE_OPTIMIZER_STAGE_PLAN_H_
#define GRANARY_PIPELINE_OPTIMIZER_STAGE_PLAN_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/core/op.h"
#include "pipeline/core/params.h"
#include "pipeline/core/udf.h"

namespace granary {

// A compiled op as the passes see it. The pointees outlive the plan.
struct PlannedOp {
  const OpInfo* info = nullptr;
  const Params* params = nullptr;  // validated (OpInfo.validate passed)
  const Udf* udf = nullptr;        // null for an op without a UDF
};

// One link of the iterator chain: one op built by its factory, or a fused run of element maps
// built as one map stage (op.h: NewMapIterator, NewParallelMapIterator).
struct Stage {
  // The stage's ops: [first_op, first_op + num_ops) of the planned ops.
  int first_op = 0;
  int num_ops = 1;
  bool fused = false;
  // Fused stages only. The threads of the stage (0: it runs on the thread pulling from it), and
  // whether one of its ops leaves them to the autotuner.
  int num_threads = 0;
  bool tuned = false;
  // Fused stages only, one entry per op: the op's UDF decodes what the next op's UDF crops, and
  // the two run as one partial decode (OpBuildArgs.decode_crop_with_next).
  std::vector<bool> decode_crop_with_next;
  // The next stage is one op taking a batch placement: the stage (its threads, or the calling
  // thread) places the rows into their batch (OpBuildArgs.placement).
  bool places_next_batch = false;
};

struct StagePlanOptions {
  bool fuse_maps = true;
  bool fuse_decode_crop = true;
};

// One stage per op, except that each maximal run of ops with OpInfo.maps_elements is one fused
// stage when `fuse_maps`.
std::vector<Stage> FuseMapRuns(const std::vector<PlannedOp>& ops, bool fuse_maps);
// Sets each fused stage's num_threads (the largest `threads` of its ops; 0 when none has the
// trait) and tuned (some op's `threads` is 0). Errors of `threads`.
absl::Status SetStageThreads(const std::vector<PlannedOp>& ops, std::vector<Stage>& stages);
// Sets each fused stage's decode_crop_with_next: pairs of adjacent ops whose UDFs
// FusesDecodeCrop, left to right, each op in one pair at most.
void FuseDecodeCrops(const std::vector<PlannedOp>& ops, std::vector<Stage>& stages);
// Sets places_next_batch on each fused stage followed by a stage whose op has
// OpInfo.placed_batch_size.
void PlaceBatches(const std::vector<PlannedOp>& ops, std::vector<Stage>& stages);

// The passes above, in that order (FuseDecodeCrops only with options.fuse_decode_crop).
absl::StatusOr<std::vector<Stage>> PlanStages(const std::vector<PlannedOp>& ops,
                                              const StagePlanOptions& options);

}  // namespace granary

#endif  // GRANARY_PIPELINE_OPTIMIZER_STAGE_PLAN_H_
