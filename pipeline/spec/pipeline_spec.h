// PipelineSpec: a validated PipelineDef — everything about a pipeline that is known without
// running it (DESIGN.md §2). The dispatcher holds pipelines as specs; Pipeline
// (pipeline/pipeline.h), which builds the iterators on a worker, is built on one.
//
// Create() checks everything that can be checked without touching data: the source type and
// its params (ranges included), every op and its params (ranges and the limits of
// pipeline/core/limits.h), every UDF (registered, of the right kind for its op, valid params by
// its UdfInfo::validate). Errors name the culprit:
//   "op 3 (map, udf 'random_crp'): unknown UDF (known: cast, decode_image, ...)".
// It needs only the registrations' declarations (pipeline/core/pipeline_registries.h), never an
// op's or UDF's implementation. Then CheckFiles() checks that the source's files exist,
// EnumerateSplits() lists its splits and PlanEpoch() orders them for one epoch.
//
// Immutable after Create; thread-safe; copyable.
#ifndef GRANARY_PIPELINE_SPEC_PIPELINE_SPEC_H_
#define GRANARY_PIPELINE_SPEC_PIPELINE_SPEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "pipeline/core/op.h"
#include "pipeline/core/params.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/source.h"
#include "pipeline/core/udf.h"
#include "proto/pipeline.pb.h"

namespace granary {

class PipelineSpec {
 public:
  // One op of the pipeline, validated.
  struct Op {
    // The op's index as the user wrote the pipeline (UserOpIndices).
    int index = 0;
    // The op's registration, copied from the registries.
    std::shared_ptr<const OpInfo> info;
    Params params;
    // The registration of the op's UDF and its validated params; null when the op takes none.
    std::shared_ptr<const UdfInfo> udf;
    Params udf_params;
    // "op 3 (map, udf 'decode_jpeg')": how errors name the op.
    std::string label;
  };

  // `registries` is only read during Create: the spec keeps its own copies of the source, op
  // and UDF registrations it names.
  static absl::StatusOr<PipelineSpec> Create(const PipelineDef& def,
                                             const PipelineRegistries& registries);

  // Whether the source's files exist: each file pattern matches a file (NotFound naming the
  // pattern, as EnumerateSplits words it). Lists directories, reads no file. The dispatcher
  // checks this when a new dataset is registered, so such a pipeline is refused then rather
  // than when an epoch starts.
  absl::Status CheckFiles(Env* env) const;

  // The source's splits in enumeration order (ids 0, 1, 2, ...).
  absl::StatusOr<std::vector<Split>> EnumerateSplits(Env* env) const;

  // The epoch's split plan: `splits`, permuted by (seed, epoch) when the source param
  // shuffle_splits is true, else unchanged.
  std::vector<Split> PlanEpoch(std::vector<Split> splits, uint64_t seed, int64_t epoch) const;

  // XXH64 of the definition's deterministic serialization: identical definitions share it.
  uint64_t Fingerprint() const;

  const PipelineDef& def() const { return def_; }
  // The registration of the pipeline's source (its traits) and its validated params.
  const SourceInfo& source() const { return *source_; }
  const std::shared_ptr<const SourceInfo>& shared_source() const { return source_; }
  const Params& source_params() const { return source_params_; }
  // The ops in pipeline order.
  const std::vector<Op>& ops() const { return ops_; }
  // Whether the pipeline contains a batch op (so its elements are batches of rows).
  bool batched() const { return batched_; }
  // Whether some op leaves a knob to the autotuner (OpInfo::autotuned: parallel_map's
  // num_threads 0, prefetch's buffer_size 0).
  bool autotuned() const { return autotuned_; }

 private:
  PipelineSpec() = default;

  PipelineDef def_;
  std::shared_ptr<const SourceInfo> source_;
  Params source_params_;
  std::vector<Op> ops_;
  bool batched_ = false;
  bool autotuned_ = false;
};

// Each op's index as the user wrote the pipeline — what its random key and error label use:
// its OpDef.original_index when AutoOrder moved it, else its position counted from
// def.cached_ops (ops a cache_read source stands in for), ops the service inserted
// (OpInfo::inserted_by_service in `ops`, as cache_write) not counted.
std::vector<int> UserOpIndices(const PipelineDef& def, const OpRegistry& ops);

}  // namespace granary

#endif  // GRANARY_PIPELINE_SPEC_PIPELINE_SPEC_H_
