#include "pipeline/pipeline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/deterministic_serialization.h"
#include "common/hash.h"
#include "common/param_nesting.h"
#include "common/stateless_random.h"
#include "common/status_macros.h"
#include "pipeline/core/allocation_guard.h"
#include "pipeline/core/autotune_iterator.h"
#include "pipeline/core/limits.h"
#include "pipeline/optimizer/stage_plan.h"
#include "pipeline/sources/source_iterator.h"

namespace granary {

std::vector<int> UserOpIndices(const PipelineDef& def, const OpRegistry& ops) {
  std::vector<int> indices;
  int index = def.cached_ops();
  for (const OpDef& op : def.ops()) {
    indices.push_back(op.has_original_index() ? op.original_index() : index);
    const OpInfo* info = ops.Find(op.op());
    if (info == nullptr || !info->inserted_by_service) ++index;
  }
  return indices;
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(const PipelineDef& def,
                                                           const PipelineRegistries& registries,
                                                           const PipelineOptions& options) {
  std::unique_ptr<Pipeline> p(new Pipeline());
  p->def_ = def;
  p->options_ = options;

  const std::string& type = def.source().type();
  absl::StatusOr<const SourceInfo*> source = registries.sources.Get(type);
  if (!source.ok()) return Annotate(source.status(), "source");
  p->source_ = std::make_shared<const SourceInfo>(**source);
  std::vector<ParamSpec> source_specs = p->source_->params;
  source_specs.push_back({"shuffle_splits", ParamType::kBool});
  ASSIGN_OR_RETURN(p->source_params_, Params::Create(def.source().params(), source_specs,
                                                     absl::StrCat("source ", type)));
  if (p->source_->validate) RETURN_IF_ERROR(p->source_->validate(p->source_params_, nullptr));

  const UdfRegistry& udfs = registries.udfs;
  const std::vector<int> indices = UserOpIndices(def, registries.ops);
  const OpInfo* previous = nullptr;
  for (int i = 0; i < def.ops_size(); ++i) {
    const OpDef& op = def.ops(i);
    CompiledOp compiled;
    compiled.index = indices[i];
    if (op.has_original_index() && (op.original_index() < 0 || op.original_index() > kMaxOps)) {
      return absl::InvalidArgumentError(absl::StrCat(OpLabel(i, op), ": original_index ",
                                                     op.original_index(), " is outside [0, ",
                                                     kMaxOps, "] (kMaxOps, pipeline/core/limits.h)"));
    }
    compiled.label = OpLabel(compiled.index, op);
    absl::StatusOr<const OpInfo*> info = registries.ops.Get(op.op());
    if (!info.ok()) return Annotate(info.status(), compiled.label);
    compiled.info = std::make_shared<const OpInfo>(**info);
    ASSIGN_OR_RETURN(compiled.params,
                     Params::Create(op.params(), compiled.info->params, compiled.label));
    if (compiled.info->validate) RETURN_IF_ERROR(compiled.info->validate(compiled.params));
    if (compiled.info->follows_udf_op && (previous == nullptr || !previous->takes_udf)) {
      return absl::InvalidArgumentError(absl::StrCat(
          compiled.label,
          ": must directly follow a map, parallel_map or filter (the ops that go "
          "on after a UDF fails for one element; ",
          previous == nullptr ? "it is the first op" : absl::StrCat("it follows ", previous->name),
          ")"));
    }
    previous = compiled.info.get();
    if (!compiled.info->takes_udf) {
      if (!op.udf().empty() || !op.udf_params().fields().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(compiled.label, ": op '", op.op(), "' takes no udf"));
      }
    } else {
      if (op.udf().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(compiled.label, ": missing 'udf'"));
      }
      const UdfInfo* udf = udfs.Find(op.udf());
      if (udf == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            compiled.label, ": unknown UDF (known: ", absl::StrJoin(udfs.Names(), ", "), ")"));
      }
      if (udf->kind != compiled.info->udf_kind) {
        return absl::InvalidArgumentError(absl::StrCat(compiled.label, ": UDF '", op.udf(), "' is ",
                                                       udf->kind == UdfKind::kPredicate
                                                           ? "a predicate (use it with filter)"
                                                           : "a map function (use it with map)"));
      }
      ASSIGN_OR_RETURN(Params udf_params,
                       Params::Create(op.udf_params(), udf->params, compiled.label));
      ASSIGN_OR_RETURN(std::unique_ptr<Udf> instance, udf->factory(udf_params));
      compiled.udf = std::move(instance);
    }
    p->batched_ = p->batched_ || compiled.info->batches;
    p->autotuned_ =
        p->autotuned_ || (compiled.info->autotuned && compiled.info->autotuned(compiled.params));
    p->ops_.push_back(std::move(compiled));
  }
  return p;
}

absl::Status Pipeline::CheckFiles(Env* env) const {
  if (!source_->validate) return absl::OkStatus();
  return source_->validate(source_params_, env);
}

absl::StatusOr<std::vector<Split>> Pipeline::EnumerateSplits(Env* env) const {
  return source_->enumerate(source_params_, env);
}

std::vector<Split> Pipeline::PlanEpoch(std::vector<Split> splits, uint64_t seed,
                                       int64_t epoch) const {
  if (!source_params_.GetBool("shuffle_splits")) return splits;
  StatelessRandom rng(RandomKey(seed, static_cast<uint64_t>(epoch), 0, UINT64_MAX));
  for (size_t i = splits.size(); i > 1; --i) std::swap(splits[i - 1], splits[rng.Uniform(i)]);
  return splits;
}

absl::StatusOr<std::unique_ptr<Iterator>> Pipeline::MakeIterator(
    const IteratorContext& ctx, std::unique_ptr<SplitProvider> provider) const {
  if (!autotuned_) return MakeStages(ctx, std::move(provider));
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
      std::make_unique<SourceIterator>(source_, source_params_,
                                       SplitOpenContext{ctx.env, ctx.pool, ctx.resources},
                                       std::move(provider)),
      absl::StrCat("source ", source_->type));
  const auto args_for = [&](size_t i) {
    IteratorContext op_ctx = ctx;
    if (ops_[i].index < ctx.cached_prefix_ops) op_ctx.epoch = 0;  // A cached prefix (iterator.h).
    return OpBuildArgs{ops_[i].params, ops_[i].udf, ops_[i].index, ops_[i].label, op_ctx};
  };
  std::vector<PlannedOp> planned;
  for (const CompiledOp& op : ops_) planned.push_back({op.info.get(), &op.params, op.udf.get()});
  ASSIGN_OR_RETURN(const std::vector<Stage> stages,
                   PlanStages(planned, {options_.fuse_maps, options_.fuse_decode_crop}));
  std::shared_ptr<BatchPlacement> placement;  // Made by the previous stage for this one.
  for (const Stage& stage : stages) {
    const CompiledOp& first = ops_[stage.first_op];
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
      const CompiledOp& batch = ops_[stage.first_op + stage.num_ops];
      placement =
          std::make_shared<BatchPlacement>(batch.info->placed_batch_size(batch.params), ctx.pool);
    }
    it = num_threads == 0 ? NewMapIterator(std::move(it), std::move(chain))
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

uint64_t Pipeline::Fingerprint() const { return Hash64(SerializeDeterministically(def_)); }

PipelineDef WithParallelMapThreads(PipelineDef def, int num_threads) {
  for (OpDef& op : *def.mutable_ops()) {
    if (op.op() == "parallel_map") {
      (*op.mutable_params()->mutable_fields())["num_threads"].set_number_value(num_threads);
    }
  }
  return def;
}

}  // namespace granary
