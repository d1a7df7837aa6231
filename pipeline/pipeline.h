// Pipeline: a validated, ready-to-run PipelineDef (DESIGN.md §2).
//
// Create() checks everything that can be checked without touching data: the source type and
// its params (ranges included), every op and its params (ranges and the limits of
// pipeline/core/limits.h), every UDF (registered, of the right kind for its op, valid params), and
// builds the UDF instances. Errors name the culprit:
//   "op 3 (map, udf 'random_crp'): unknown UDF (known: cast, decode_image, ...)".
// Then, per run: EnumerateSplits() lists the source's splits (NotFound naming a file pattern
// that matches nothing), PlanEpoch() orders them for one epoch, and MakeIterator() builds the
// iterator chain over a SplitProvider.
//
// Immutable after Create; thread-safe.
#ifndef GRANARY_PIPELINE_PIPELINE_H_
#define GRANARY_PIPELINE_PIPELINE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/core/autotuner.h"
#include "pipeline/core/iterator.h"
#include "pipeline/core/op.h"
#include "pipeline/pipeline_registries.h"
#include "pipeline/core/source.h"
#include "pipeline/core/split_provider.h"
#include "pipeline/core/udf.h"
#include "proto/pipeline.pb.h"

namespace granary {

struct PipelineOptions {
  // Run each run of consecutive map / parallel_map ops as one stage (op.h). Off only to compare
  // against or debug the unfused pipeline: the output is the same either way.
  bool fuse_maps = true;
  // Within such a stage, decode only the part of a JPEG that a crop right after the decode keeps
  // (decode_crop_fusion.h). Off only to compare: the output is the same either way.
  bool fuse_decode_crop = true;
  // How stages given num_threads 0 / buffer_size 0 are tuned (autotuner.h).
  AutotuneOptions autotune;
};

class Pipeline {
 public:
  // `registries` is only read during Create: the Pipeline keeps its own copies of the source
  // and op registrations it names.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(const PipelineDef& def,
                                                          const PipelineRegistries& registries,
                                                          const PipelineOptions& options = {});

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

  // The full iterator chain reading splits from `provider`. When some parallel_map has
  // num_threads 0 or some prefetch buffer_size 0, the chain is wrapped in an AutotuneIterator
  // (autotune_iterator.h) that tunes them.
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(
      const IteratorContext& ctx, std::unique_ptr<SplitProvider> provider) const;

  // Whether the pipeline contains a batch op (so its elements are batches of rows).
  bool batched() const { return batched_; }
  // Where the last tuning of this pipeline's tuned stages ended, in their build order:
  // "2, 3 (done)" ("" when it has none or none ran yet).
  std::string AutotunedThreads() const;
  const PipelineDef& def() const { return def_; }
  // The registration of the pipeline's source (its traits).
  const SourceInfo& source() const { return *source_; }
  // XXH64 of the definition's deterministic serialization: identical definitions share it.
  uint64_t Fingerprint() const;

 private:
  // The chain MakeIterator returns, without the autotuning wrapper.
  absl::StatusOr<std::unique_ptr<Iterator>> MakeStages(
      const IteratorContext& ctx, std::unique_ptr<SplitProvider> provider) const;

  struct CompiledOp {
    // The op's index among the user's ops (PipelineDef.cached_ops).
    int index;
    std::shared_ptr<const OpInfo> info;
    Params params;
    std::shared_ptr<const Udf> udf;
    std::string label;
  };

  Pipeline() = default;

  PipelineDef def_;
  PipelineOptions options_;
  std::shared_ptr<const SourceInfo> source_;
  Params source_params_;
  std::vector<CompiledOp> ops_;
  bool batched_ = false;
  // Some parallel_map has num_threads 0 or some prefetch buffer_size 0: each iterator chain
  // gets an Autotuner.
  bool autotuned_ = false;
  // Where the last tuning of this pipeline ended: the next iterator starts there.
  std::shared_ptr<AutotuneMemo> autotune_memo_ = std::make_shared<AutotuneMemo>();
};

// `def` with every parallel_map set to `num_threads` threads (a worker's --threads, benchmarks).
PipelineDef WithParallelMapThreads(PipelineDef def, int num_threads);

// Each op's index as the user wrote the pipeline — what its random key and error label use:
// its OpDef.original_index when AutoOrder moved it, else its position counted from
// def.cached_ops (ops a cache_read source stands in for), ops the service inserted
// (OpInfo::inserted_by_service in `ops`, as cache_write) not counted.
std::vector<int> UserOpIndices(const PipelineDef& def, const OpRegistry& ops);

}  // namespace granary

#endif  // GRANARY_PIPELINE_PIPELINE_H_
