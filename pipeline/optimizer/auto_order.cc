#include "pipeline/optimizer/auto_order.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/stateless_random.h"
#include "common/status_macros.h"
#include "pipeline/pipeline.h"
#include "pipeline/core/split_provider.h"

namespace granary {
namespace {

bool IsMapOp(const OpDef& op) { return op.op() == "map" || op.op() == "parallel_map"; }

// The op's tensor: its UDF's `index` param (0 when not given).
double TensorIndexOf(const OpDef& op) {
  const auto& fields = op.udf_params().fields();
  const auto it = fields.find("index");
  return it == fields.end() ? 0 : it->second.number_value();
}

UdfRole RoleOf(const OpDef& op, const PipelineRegistries& registries) {
  const UdfInfo* info = registries.udfs.Find(op.udf());
  return info == nullptr ? UdfRole::kOther : info->role;
}

// The first `sample` elements of the first split of `def`'s source, in its order.
absl::StatusOr<std::vector<Element>> SourceSample(const PipelineDef& def, const PipelineRegistries& registries,
                                                  Env* env, int sample) {
  PipelineDef source_only;
  *source_only.mutable_source() = def.source();
  ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> pipeline, Pipeline::Create(source_only, registries));
  ASSIGN_OR_RETURN(std::vector<Split> splits, pipeline->EnumerateSplits(env));
  if (splits.size() > 1) splits.resize(1);
  IteratorContext ctx;
  ctx.env = env;
  ASSIGN_OR_RETURN(std::unique_ptr<Iterator> it,
                   pipeline->MakeIterator(ctx, std::make_unique<PlannedSplitProvider>(splits)));
  std::vector<Element> elements;
  while (static_cast<int>(elements.size()) < sample) {
    Element element;
    bool end = false;
    RETURN_IF_ERROR(it->GetNext(&element, &end));
    if (end) break;
    elements.push_back(std::move(element));
  }
  return elements;
}

double TotalBytes(const std::vector<Element>& elements) {
  double bytes = 0;
  for (const Element& e : elements) bytes += static_cast<double>(e.ByteSize());
  return bytes;
}

}  // namespace

bool Commute(const OpDef& a, const OpDef& b, const PipelineRegistries& registries) {
  if (!IsMapOp(a) || !IsMapOp(b) || a.keep_position() || b.keep_position()) return false;
  if (TensorIndexOf(a) != TensorIndexOf(b)) return false;
  const UdfRole ra = RoleOf(a, registries);
  const UdfRole rb = RoleOf(b, registries);
  return (ra == UdfRole::kPixelwise && rb == UdfRole::kPixelSelecting) ||
         (ra == UdfRole::kPixelSelecting && rb == UdfRole::kPixelwise);
}

PipelineDef Reorder(const PipelineDef& def, const PipelineRegistries& registries,
                    const std::vector<OpProfile>& profile) {
  PipelineDef out = def;
  const std::vector<int> indices = UserOpIndices(def, registries.ops);
  std::vector<int> order(def.ops_size());
  for (int i = 0; i < def.ops_size(); ++i) order[i] = i;
  const auto inflation = [&](int op) {
    return op < static_cast<int>(profile.size()) ? profile[op].inflation : 1.0;
  };
  // Bubble each op towards the front while it commutes with its predecessor and inflates less:
  // a stable sort by inflation through allowed swaps (commuting ops are adjacent map ops, so no
  // op ever crosses a non-map op).
  for (bool moved = true; moved;) {
    moved = false;
    for (int j = 0; j + 1 < static_cast<int>(order.size()); ++j) {
      const int a = order[j];
      const int b = order[j + 1];
      if (inflation(b) < inflation(a) && Commute(def.ops(a), def.ops(b), registries)) {
        std::swap(order[j], order[j + 1]);
        moved = true;
      }
    }
  }
  for (int j = 0; j < static_cast<int>(order.size()); ++j) {
    *out.mutable_ops(j) = def.ops(order[j]);
    if (order[j] != j) out.mutable_ops(j)->set_original_index(indices[order[j]]);
  }
  return out;
}

absl::StatusOr<std::vector<OpProfile>> ProfileOps(const PipelineDef& def, const PipelineRegistries& registries,
                                                  Env* env, int sample) {
  std::vector<OpProfile> profile(def.ops_size());
  absl::StatusOr<std::vector<Element>> source = SourceSample(def, registries, env, sample);
  if (!source.ok()) return Annotate(source.status(), "AutoOrder profile");
  std::vector<Element> elements = *std::move(source);
  for (int i = 0; i < def.ops_size() && !elements.empty(); ++i) {
    const OpDef& op = def.ops(i);
    if (op.op() == "batch") break;
    if (op.op() != "filter" && !IsMapOp(op)) continue;  // Changes no element.
    const UdfInfo* info = registries.udfs.Find(op.udf());
    if (info == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("AutoOrder profile: op ", i, ": unknown udf '", op.udf(), "'"));
    }
    absl::StatusOr<Params> params =
        Params::Create(op.udf_params(), info->params, absl::StrCat("op ", i));
    if (!params.ok()) return Annotate(params.status(), "AutoOrder profile");
    absl::StatusOr<std::unique_ptr<Udf>> udf = info->factory(*params);
    if (!udf.ok()) return Annotate(udf.status(), "AutoOrder profile");
    // Elements the UDF fails on leave the sample (as ignore_errors would drop them).
    const double bytes_in = TotalBytes(elements);
    std::vector<Element> kept;
    const absl::Time start = absl::Now();
    for (Element& element : elements) {
      const UdfCall call{RandomKey(0, 0, element.ProvenanceKey(), static_cast<uint64_t>(i))};
      if (info->kind == UdfKind::kPredicate) {
        absl::StatusOr<bool> keep = (*udf)->Keep(element, call);
        if (keep.ok() && *keep) kept.push_back(std::move(element));
      } else if ((*udf)->Map(element, call).ok()) {
        kept.push_back(std::move(element));
      }
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    if (info->kind == UdfKind::kMap && !kept.empty() && bytes_in > 0) {
      profile[i].inflation = (TotalBytes(kept) / kept.size()) / (bytes_in / elements.size());
      profile[i].us_per_element = 1e6 * seconds / elements.size();
    }
    elements = std::move(kept);
  }
  return profile;
}

std::string DescribeOrder(const PipelineDef& def) {
  std::string out;
  for (const OpDef& op : def.ops()) {
    absl::StrAppend(&out, out.empty() ? "" : " ", op.udf().empty() ? op.op() : op.udf());
    if (op.has_original_index()) absl::StrAppend(&out, "(op ", op.original_index(), ")");
  }
  return out;
}

absl::StatusOr<PipelineDef> AutoOrder(const PipelineDef& def, const PipelineRegistries& registries, Env* env) {
  ASSIGN_OR_RETURN(const std::vector<OpProfile> profile, ProfileOps(def, registries, env));
  return Reorder(def, registries, profile);
}

}  // namespace granary
