#include "pipeline/spec/pipeline_spec.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/deterministic_serialization.h"
#include "common/hash.h"
#include "common/param_nesting.h"
#include "common/stateless_random.h"
#include "common/status_macros.h"
#include "pipeline/core/limits.h"

namespace granary {
namespace {

// `udf`'s params checked as a pipeline is validated: by its validate, or when it declares none
// (a plugin), by building it.
absl::Status ValidateUdfParams(const UdfInfo& udf, const Params& params) {
  if (udf.validate) return udf.validate(params);
  if (udf.factory) return udf.factory(params).status();
  return absl::OkStatus();
}

}  // namespace

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

absl::StatusOr<PipelineSpec> PipelineSpec::Create(const PipelineDef& def,
                                                  const PipelineRegistries& registries) {
  PipelineSpec spec;
  spec.def_ = def;

  const std::string& type = def.source().type();
  absl::StatusOr<const SourceInfo*> source = registries.sources.Get(type);
  if (!source.ok()) return Annotate(source.status(), "source");
  spec.source_ = std::make_shared<const SourceInfo>(**source);
  std::vector<ParamSpec> source_specs = spec.source_->params;
  source_specs.push_back({"shuffle_splits", ParamType::kBool});
  ASSIGN_OR_RETURN(spec.source_params_, Params::Create(def.source().params(), source_specs,
                                                       absl::StrCat("source ", type)));
  if (spec.source_->validate) {
    RETURN_IF_ERROR(spec.source_->validate(spec.source_params_, nullptr));
  }

  const UdfRegistry& udfs = registries.udfs;
  const std::vector<int> indices = UserOpIndices(def, registries.ops);
  const OpInfo* previous = nullptr;
  for (int i = 0; i < def.ops_size(); ++i) {
    const OpDef& op = def.ops(i);
    Op validated;
    validated.index = indices[i];
    if (op.has_original_index() && (op.original_index() < 0 || op.original_index() > kMaxOps)) {
      return absl::InvalidArgumentError(
          absl::StrCat(OpLabel(i, op), ": original_index ", op.original_index(), " is outside [0, ",
                       kMaxOps, "] (kMaxOps, pipeline/core/limits.h)"));
    }
    validated.label = OpLabel(validated.index, op);
    absl::StatusOr<const OpInfo*> info = registries.ops.Get(op.op());
    if (!info.ok()) return Annotate(info.status(), validated.label);
    validated.info = std::make_shared<const OpInfo>(**info);
    ASSIGN_OR_RETURN(validated.params,
                     Params::Create(op.params(), validated.info->params, validated.label));
    if (validated.info->validate) RETURN_IF_ERROR(validated.info->validate(validated.params));
    if (validated.info->follows_udf_op && (previous == nullptr || !previous->takes_udf)) {
      return absl::InvalidArgumentError(absl::StrCat(
          validated.label,
          ": must directly follow a map, parallel_map or filter (the ops that go "
          "on after a UDF fails for one element; ",
          previous == nullptr ? "it is the first op" : absl::StrCat("it follows ", previous->name),
          ")"));
    }
    previous = validated.info.get();
    if (!validated.info->takes_udf) {
      if (!op.udf().empty() || !op.udf_params().fields().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(validated.label, ": op '", op.op(), "' takes no udf"));
      }
    } else {
      if (op.udf().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(validated.label, ": missing 'udf'"));
      }
      const UdfInfo* udf = udfs.Find(op.udf());
      if (udf == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            validated.label, ": unknown UDF (known: ", absl::StrJoin(udfs.Names(), ", "), ")"));
      }
      if (udf->kind != validated.info->udf_kind) {
        return absl::InvalidArgumentError(
            absl::StrCat(validated.label, ": UDF '", op.udf(), "' is ",
                         udf->kind == UdfKind::kPredicate ? "a predicate (use it with filter)"
                                                          : "a map function (use it with map)"));
      }
      validated.udf = std::make_shared<const UdfInfo>(*udf);
      ASSIGN_OR_RETURN(validated.udf_params,
                       Params::Create(op.udf_params(), udf->params, validated.label));
      RETURN_IF_ERROR(ValidateUdfParams(*udf, validated.udf_params));
    }
    spec.batched_ = spec.batched_ || validated.info->batches;
    spec.autotuned_ = spec.autotuned_ ||
                      (validated.info->autotuned && validated.info->autotuned(validated.params));
    spec.ops_.push_back(std::move(validated));
  }
  return spec;
}

absl::Status PipelineSpec::CheckFiles(Env* env) const {
  if (!source_->validate) return absl::OkStatus();
  return source_->validate(source_params_, env);
}

absl::StatusOr<std::vector<Split>> PipelineSpec::EnumerateSplits(Env* env) const {
  return source_->enumerate(source_params_, env);
}

std::vector<Split> PipelineSpec::PlanEpoch(std::vector<Split> splits, uint64_t seed,
                                           int64_t epoch) const {
  if (!source_params_.GetBool("shuffle_splits")) return splits;
  StatelessRandom rng(RandomKey(seed, static_cast<uint64_t>(epoch), 0, UINT64_MAX));
  for (size_t i = splits.size(); i > 1; --i) std::swap(splits[i - 1], splits[rng.Uniform(i)]);
  return splits;
}

uint64_t PipelineSpec::Fingerprint() const { return Hash64(SerializeDeterministically(def_)); }

}  // namespace granary
