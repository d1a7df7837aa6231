// The trainer-side tail of a pipeline (issue 36): its last normalize ops, which turn each uint8
// image into a float32 one four times its size. A worker may leave them to the reader of a task
// (JobOptions.tail, worker/task_runner.h): it runs the pipeline without them and sends uint8
// images with the tail's description (GetElementsResponse.trainer_tail), and the trainer's
// client runs the tail on each element as it takes it out of the receive buffer
// (client/trainer_tail_runner.h), with the normalize UDF's own arithmetic
// (pipeline/kernels/normalize_kernel.h). The wire carries a quarter of the bytes; the delivered
// tensors are byte-identical.
//
// The tail is the run of normalize ops (map or parallel_map) at the end of the pipeline,
// followed by nothing but batch and prefetch ops: normalize works value by value within a
// channel, so it gives the same values on an image and on a batch that stacks it, and prefetch
// only holds elements. A pipeline that reads or writes the cache has none (a cache holds what
// its pipeline made, as the dispatcher keys it), nor one whose tail is more than a client runs
// (kMaxTrainerTailSteps, kMaxTrainerTailChannelValues).
//
// Limits: a batch of rows whose images differ in dtype at a normalize's tensor (some uint8, some
// float32) batches after the normalize that makes them all float32, not before it — such a
// pipeline fails on the worker without the tail. The 2 GiB limit of an element is checked on the
// uint8 batch by the worker and on the float32 one by the client.
#ifndef GRANARY_PIPELINE_TRAINER_TAIL_H_
#define GRANARY_PIPELINE_TRAINER_TAIL_H_

#include <optional>

#include "absl/status/statusor.h"
#include "pipeline/core/pipeline_registries.h"
#include "proto/pipeline.pb.h"

namespace granary {

struct TrainerTailSplit {
  // `def` without the tail's ops. The ops after the tail keep their indices as written
  // (OpDef.original_index), so their random keys and error labels do not change. A `map` right
  // before a `parallel_map` normalize becomes a `parallel_map` with its params, so the fused
  // stage keeps its threads.
  PipelineDef worker;
  TrainerTailDef tail;
};

// The split of `def` (a valid pipeline); nullopt when it has no trainer-side tail. Errors are
// PipelineSpec::Create's and normalize's parameter errors.
absl::StatusOr<std::optional<TrainerTailSplit>> SplitTrainerTail(
    const PipelineDef& def, const PipelineRegistries& registries);

}  // namespace granary

#endif  // GRANARY_PIPELINE_TRAINER_TAIL_H_
