#include "pipeline/trainer_tail.h"

#include <vector>

#include "common/status_macros.h"
#include "pipeline/kernels/normalize_kernel.h"
#include "pipeline/spec/pipeline_spec.h"
#include "pipeline/spec/udf_declarations.h"

namespace granary {
namespace {

bool IsNormalize(const PipelineSpec::Op& op) {
  return (op.info->name == "map" || op.info->name == "parallel_map") && op.udf != nullptr &&
         op.udf->name == "normalize";
}

}  // namespace

absl::StatusOr<std::optional<TrainerTailSplit>> SplitTrainerTail(
    const PipelineDef& def, const PipelineRegistries& registries) {
  ASSIGN_OR_RETURN(const PipelineSpec spec, PipelineSpec::Create(def, registries));
  if (spec.source().reads_cache_chunks || def.cached_ops() != 0) return std::nullopt;
  const std::vector<PipelineSpec::Op>& ops = spec.ops();
  for (const PipelineSpec::Op& op : ops) {
    if (op.info->inserted_by_service) return std::nullopt;  // cache_write
  }
  // From the end: batch and prefetch ops, then the normalize ops before them.
  int end = static_cast<int>(ops.size());
  int batch_dims = 0;
  while (end > 0 && (ops[end - 1].info->name == "batch" || ops[end - 1].info->name == "prefetch")) {
    if (ops[end - 1].info->name == "batch") ++batch_dims;
    --end;
  }
  int begin = end;
  while (begin > 0 && IsNormalize(ops[begin - 1])) --begin;
  if (begin == end || end - begin > kMaxTrainerTailSteps) return std::nullopt;

  TrainerTailSplit split;
  split.tail.set_batch_dims(batch_dims);
  for (int i = begin; i < end; ++i) {
    ASSIGN_OR_RETURN(const NormalizeConfig config, ReadNormalizeConfig(ops[i].udf_params));
    if (config.mean.size() > kMaxTrainerTailChannelValues ||
        config.std.size() > kMaxTrainerTailChannelValues) {
      return std::nullopt;  // More than a client builds tables for: the worker keeps it.
    }
    TrainerTailDef::Step* step = split.tail.add_steps();
    step->set_label(ops[i].label);
    TrainerTailDef::Normalize* normalize = step->mutable_normalize();
    normalize->set_index(config.index);
    normalize->set_scale(config.scale);
    for (float m : config.mean) normalize->add_mean(m);
    for (float s : config.std) normalize->add_std(s);
  }
  split.worker = def;
  split.worker.clear_ops();
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    if (i >= begin && i < end) continue;
    OpDef* op = split.worker.add_ops();
    *op = def.ops(i);
    if (i >= end) op->set_original_index(ops[i].index);
  }
  // A run of map ops fuses into one stage with its largest thread count: a parallel normalize
  // gone, the map before it takes its threads (parallel_map keeps the order: the same bytes).
  const OpDef* parallel = nullptr;
  for (int i = begin; i < end; ++i) {
    if (def.ops(i).op() == "parallel_map") parallel = &def.ops(i);
  }
  if (parallel != nullptr && begin > 0 && def.ops(begin - 1).op() == "map") {
    OpDef& before = *split.worker.mutable_ops(begin - 1);
    before.set_op("parallel_map");
    *before.mutable_params() = parallel->params();
  }
  return split;
}

}  // namespace granary
