#include "pipeline/pipeline.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "pipeline/core/allocation_guard.h"
#include "pipeline/core/autotune_iterator.h"
#include "pipeline/optimizer/stage_plan.h"
#include "pipeline/sources/source_iterator.h"

namespace granary {

namespace {

// FailedPrecondition: `what` is only declared in the registries a pipeline is built from.
absl::Status NotImplemented(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      what,
      " is only declared, without its implementation: registries of declarations validate "
      "pipelines but cannot run them (pipeline/core/pipeline_registries.h)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(const PipelineDef& def,
                                                           const PipelineRegistries& registries,
                                                           const PipelineOptions& options) {
  ASSIGN_OR_RETURN(PipelineSpec spec, PipelineSpec::Create(def, registries));
  if (!spec.source().open) {
    return NotImplemented(absl::StrCat("source '", spec.source().type, "'"));
  }
  std::unique_ptr<Pipeline> p(new Pipeline(std::move(spec), options));
  for (const PipelineSpec::Op& op : p->spec_.ops()) {
    if (!op.info->factory) {
      return NotImplemented(absl::StrCat(op.label, ": op '", op.info->name, "'"));
    }
    if (op.udf == nullptr) {
      p->udfs_.push_back(nullptr);
      continue;
    }
    if (!op.udf->factory) {
      return NotImplemented(absl::StrCat(op.label, ": UDF '", op.udf->name, "'"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Udf> udf, op.udf->factory(op.udf_params));
    p->udfs_.push_back(std::move(udf));
  }
  return p;
}

absl::StatusOr<std::unique_ptr<Iterator>> Pipeline::MakeIterator(
    const IteratorContext& ctx, std::unique_ptr<SplitProvider> provider) const {
  if (!spec_.autotuned()) return MakeStages(ctx, std::move(provider));
  // The tuner outlives the stages that register with it: the wrapper owns both.
  auto tuner = std::make_unique<Autotuner>(options_.autotune, autotune_memo_);
  IteratorContext tuned = ctx;
  tuned.autotuner = tuner.get();
  ASSIGN_OR_RETURN(std::unique_ptr<Iterator> stages, MakeStages(tuned, std::move(provider)));
  return std::make_unique<AutotuneIterator>(std::move(tuner), std::move(stages), ctx.env);
}

absl::StatusOr<std::unique_ptr<Iterator>> Pipeline::MakeStages(
    const IteratorContext& ctx, std::unique_ptr<SplitProvider> provider) const {
  // Every stage is wrapped in GuardAllocations: a failed allocation is an error naming it.
  std::unique_ptr<Iterator> it = GuardAllocations(
      std::make_unique<SourceIterator>(spec_.shared_source(), spec_.source_params(),
                                       SplitOpenContext{ctx.env, ctx.pool, ctx.resources},
                                       std::move(provider)),
      absl::StrCat("source ", spec_.source().type));
  const std::vector<PipelineSpec::Op>& ops = spec_.ops();
  const auto args_for = [&](size_t i) {
    IteratorContext op_ctx = ctx;
    if (ops[i].index < ctx.cached_prefix_ops) op_ctx.epoch = 0;  // A cached prefix (iterator.h).
    return OpBuildArgs{ops[i].params, udfs_[i], ops[i].index, ops[i].label, op_ctx};
  };
  std::vector<PlannedOp> planned;
  for (size_t i = 0; i < ops.size(); ++i) {
    planned.push_back({ops[i].info.get(), &ops[i].params, udfs_[i].get()});
  }
  ASSIGN_OR_RETURN(const std::vector<Stage> stages,
                   PlanStages(planned, {options_.fuse_maps, options_.fuse_decode_crop}));
  std::shared_ptr<BatchPlacement> placement;  // Made by the previous stage for this one.
  for (const Stage& stage : stages) {
    const PipelineSpec::Op& first = ops[stage.first_op];
    if (!stage.fused) {
      OpBuildArgs args = args_for(stage.first_op);
      args.placement = std::move(placement);
      ASSIGN_OR_RETURN(it, first.info->factory(std::move(it), args));
      it = GuardAllocations(std::move(it), first.label);
      continue;
    }
    std::vector<OpBuildArgs> chain;
    for (int k = 0; k < stage.num_ops; ++k) {
      chain.push_back(args_for(stage.first_op + k));
      chain.back().decode_crop_with_next = stage.decode_crop_with_next[k];
    }
    Autotuner* tuner = stage.tuned ? ctx.autotuner : nullptr;
    int num_threads = tuner != nullptr ? tuner->max_threads() : stage.num_threads;
    if (stage.tuned && num_threads == 0) num_threads = 1;
    if (stage.places_next_batch) {
      const PipelineSpec::Op& batch = ops[stage.first_op + stage.num_ops];
      placement =
          std::make_shared<BatchPlacement>(batch.info->placed_batch_size(batch.params), ctx.pool);
    }
    it = num_threads == 0 ? NewMapIterator(std::move(it), std::move(chain), placement)
                          : NewParallelMapIterator(std::move(it), std::move(chain), num_threads,
                                                   placement, tuner);
    it = GuardAllocations(std::move(it), first.label);
  }
  return it;
}

std::string Pipeline::AutotunedThreads() const {
  const AutotuneMemo::Progress progress = autotune_memo_->Get();
  if (progress.values.empty()) return "";
  return absl::StrCat(absl::StrJoin(progress.values, ", "), progress.done ? " (done)" : "");
}

PipelineDef WithParallelMapThreads(PipelineDef def, int num_threads) {
  for (OpDef& op : *def.mutable_ops()) {
    if (op.op() == "parallel_map") {
      (*op.mutable_params()->mutable_fields())["num_threads"].set_number_value(num_threads);
    }
  }
  return def;
}

}  // namespace granary
