#include "pipeline/trainer_tail.h"

#include <vector>

#include "common/status_macros.h"
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
  bool batched = false;
  while (end > 0 && (ops[end - 1].info->name == "batch" || ops[end - 1].info->name == "prefetch")) {
    batched = batched || ops[end - 1].info->name == "batch";
    --end;
  }
  int begin = end;
  while (begin > 0 && IsNormalize(ops[begin - 1])) --begin;
  if (begin == end) return std::nullopt;

  TrainerTailSplit split;
  split.tail.set_batched(batched);
  for (int i = begin; i < end; ++i) {
    ASSIGN_OR_RETURN(const NormalizeConfig config, ReadNormalizeConfig(ops[i].udf_params));
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
  return split;
}

}  // namespace granary
