// Pipeline: a validated, ready-to-run PipelineDef (DESIGN.md §2) — what a worker builds
// iterators from.
//
// Create() validates the definition as PipelineSpec::Create does (pipeline/spec/pipeline_spec.h:
// every check and error is there, once), then checks that every registration it names has its
// implementation (a source's open, an op's and a UDF's factory: FailedPrecondition naming the
// op when the registries hold only declarations) and builds the UDF instances. Then, per run:
// EnumerateSplits() lists the source's splits (NotFound naming a file pattern that matches
// nothing), PlanEpoch() orders them for one epoch, and MakeIterator() builds the iterator chain
// over a SplitProvider.
//
// Immutable after Create; thread-safe.
#ifndef GRANARY_PIPELINE_PIPELINE_H_
#define GRANARY_PIPELINE_PIPELINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/core/autotuner.h"
#include "pipeline/core/iterator.h"
#include "pipeline/core/op.h"
#include "pipeline/core/pipeline_registries.h"
#include "pipeline/core/source.h"
#include "pipeline/core/split_provider.h"
#include "pipeline/core/udf.h"
#include "pipeline/spec/pipeline_spec.h"
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
  // `registries` is only read during Create: the Pipeline keeps its own copies of the source,
  // op and UDF registrations it names.
  static absl::StatusOr<std::unique_ptr<Pipeline>> Create(const PipelineDef& def,
                                                          const PipelineRegistries& registries,
                                                          const PipelineOptions& options = {});

  // The validated definition: CheckFiles, EnumerateSplits, PlanEpoch, Fingerprint as
  // PipelineSpec's.
  const PipelineSpec& spec() const { return spec_; }
  absl::Status CheckFiles(Env* env) const { return spec_.CheckFiles(env); }
  absl::StatusOr<std::vector<Split>> EnumerateSplits(Env* env) const {
    return spec_.EnumerateSplits(env);
  }
  std::vector<Split> PlanEpoch(std::vector<Split> splits, uint64_t seed, int64_t epoch) const {
    return spec_.PlanEpoch(std::move(splits), seed, epoch);
  }
  uint64_t Fingerprint() const { return spec_.Fingerprint(); }
  const PipelineDef& def() const { return spec_.def(); }
  // The registration of the pipeline's source (its traits).
  const SourceInfo& source() const { return spec_.source(); }
  // Whether the pipeline contains a batch op (so its elements are batches of rows).
  bool batched() const { return spec_.batched(); }

  // The full iterator chain reading splits from `provider`. When some parallel_map has
  // num_threads 0 or some prefetch buffer_size 0, the chain is wrapped in an AutotuneIterator
  // (autotune_iterator.h) that tunes them.
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(
      const IteratorContext& ctx, std::unique_ptr<SplitProvider> provider) const;

  // Where the last tuning of this pipeline's tuned stages ended, in their build order:
  // "2, 3 (done)" ("" when it has none or none ran yet).
  std::string AutotunedThreads() const;

 private:
  // The chain MakeIterator returns, without the autotuning wrapper.
  absl::StatusOr<std::unique_ptr<Iterator>> MakeStages(
      const IteratorContext& ctx, std::unique_ptr<SplitProvider> provider) const;

  Pipeline(PipelineSpec spec, const PipelineOptions& options)
      : spec_(std::move(spec)), options_(options) {}

  const PipelineSpec spec_;
  const PipelineOptions options_;
  // Per op of spec_.ops(), its UDF instance; null for ops without a UDF.
  std::vector<std::shared_ptr<const Udf>> udfs_;
  // Where the last tuning of this pipeline ended: the next iterator starts there.
  std::shared_ptr<AutotuneMemo> autotune_memo_ = std::make_shared<AutotuneMemo>();
};

// `def` with every parallel_map set to `num_threads` threads (a worker's --threads, benchmarks).
PipelineDef WithParallelMapThreads(PipelineDef def, int num_threads);

}  // namespace granary

#endif  // GRANARY_PIPELINE_PIPELINE_H_
