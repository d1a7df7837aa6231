#include "pipeline/ops/udf_invoker.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/stateless_random.h"
#include "common/status_macros.h"
#include "pipeline/core/allocation_guard.h"
#include "pipeline/udfs/decode_crop_fusion.h"

namespace granary {
namespace {

UdfCall CallFor(const OpBuildArgs& args, const Element& element) {
  return UdfCall{RandomKey(args.ctx.seed, static_cast<uint64_t>(args.ctx.epoch),
                           element.ProvenanceKey(), static_cast<uint64_t>(args.op_index))};
}

std::string Context(const OpBuildArgs& args, const Element& element) {
  return absl::StrCat(args.label, " at ", element.Origin());
}

constexpr char kUdfElementErrorUrl[] = "granary/udf_element_error";

}  // namespace

bool IsUdfElementError(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kUdfElementErrorUrl).has_value();
}

absl::Status MarkUdfElementError(absl::Status status) {
  if (!status.ok()) status.SetPayload(kUdfElementErrorUrl, absl::Cord("1"));
  return status;
}

absl::Status InvokeMapUdfs(const std::vector<OpBuildArgs>& chain, Element& element) {
  for (size_t k = 0; k < chain.size(); ++k) {
    const OpBuildArgs& args = chain[k];
    if (args.decode_crop_with_next) {
      const OpBuildArgs& crop = chain[++k];
      bool crop_failed = false;
      const absl::Status status = CatchAllocationFailure([&] {
        return RunDecodeCrop(*args.udf, CallFor(args, element), *crop.udf, CallFor(crop, element),
                             element, &crop_failed);
      });
      if (!status.ok()) {
        return MarkUdfElementError(Annotate(status, Context(crop_failed ? crop : args, element)));
      }
      continue;
    }
    const UdfCall call = CallFor(args, element);
    const absl::Status status =
        CatchAllocationFailure([&] { return args.udf->Map(element, call); });
    if (!status.ok()) return MarkUdfElementError(Annotate(status, Context(args, element)));
  }
  return absl::OkStatus();
}

absl::Status InvokeMapUdfsPlaced(const std::vector<OpBuildArgs>& chain, Element& element,
                                 BatchPlacement* placement, int64_t seq) {
  if (placement == nullptr) return InvokeMapUdfs(chain, element);
  std::vector<RowDestination> destinations = placement->Destinations(seq);
  absl::Status status;
  {
    ScopedRowDestinations scope(&destinations);
    status = InvokeMapUdfs(chain, element);
  }
  if (status.ok()) placement->Place(seq, element);
  return status;
}

absl::StatusOr<bool> InvokePredicateUdf(const OpBuildArgs& args, const Element& element) {
  bool keep = false;
  const absl::Status status = CatchAllocationFailure([&]() -> absl::Status {
    ASSIGN_OR_RETURN(keep, args.udf->Keep(element, CallFor(args, element)));
    return absl::OkStatus();
  });
  if (!status.ok()) return MarkUdfElementError(Annotate(status, Context(args, element)));
  return keep;
}

}  // namespace granary
