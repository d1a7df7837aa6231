// How map, parallel_map and filter call their UDF: derive the stateless random key for the
// element and prefix any error with the op's label and the element's origin, e.g.
//   "op 2 (map, udf 'decode_jpeg') at split 3 record 17: decode_jpeg: Not a JPEG file".
// A failed allocation inside the UDF is such an error too (ResourceExhausted "out of memory",
// allocation_guard.h).
#ifndef GRANARY_PIPELINE_OPS_UDF_INVOKER_H_
#define GRANARY_PIPELINE_OPS_UDF_INVOKER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/core/batch_placement.h"
#include "pipeline/core/op.h"

namespace granary {

// Whether `status` is a UDF's error for one element as the functions below return it (and map,
// parallel_map and filter pass it on unchanged): what ignore_errors may drop. A status payload
// marks it; Annotate and other rewrapping drop the mark.
bool IsUdfElementError(const absl::Status& status);
// `status` marked as IsUdfElementError (for restoring one saved by parallel_map).
absl::Status MarkUdfElementError(absl::Status status);

// Applies the kMap UDFs of `chain` (one or more fused map ops) in order. Thread-safe (as the
// UDFs are).
absl::Status InvokeMapUdfs(const std::vector<OpBuildArgs>& chain, Element& element);
// InvokeMapUdfs for the row with output sequence number `seq` of a stage whose rows a batch op
// takes from `placement` (batch_placement.h; null: none): the UDFs make the row in its place in
// its batch when they can, else it is copied there after them. Thread-safe.
absl::Status InvokeMapUdfsPlaced(const std::vector<OpBuildArgs>& chain, Element& element,
                                 BatchPlacement* placement, int64_t seq);
// REQUIRES: args.udf is a kPredicate UDF. Thread-safe (as the UDF is).
absl::StatusOr<bool> InvokePredicateUdf(const OpBuildArgs& args, const Element& element);

}  // namespace granary

#endif  // GRANARY_PIPELINE_OPS_UDF_INVOKER_H_
