// Running a pipeline in-process, one epoch at a time: what `granary local` does, and the
// reference every service run is compared against (DESIGN.md §6).
#ifndef GRANARY_PIPELINE_LOCAL_RUNNER_H_
#define GRANARY_PIPELINE_LOCAL_RUNNER_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/status/statusor.h"
#include "pipeline/digests/epoch_digest.h"
#include "pipeline/pipeline.h"

namespace granary {

struct EpochResult {
  int64_t epoch = 0;
  // Elements the pipeline yielded (batches, in a batched pipeline) and rows digested.
  int64_t elements = 0;
  // Rows digested (0 without EpochRunOptions::digest).
  int64_t rows = 0;
  int64_t bytes = 0;
  double seconds = 0;
  // Elements ignore_errors dropped.
  int64_t skipped = 0;
  std::string digest_line;
};

struct EpochRunOptions {
  // Whether to hash every row into EpochResult::digest_line (benchmarks of the pipeline alone
  // turn it off: a trainer does not pay for it).
  bool digest = true;
  // Called for each element in order, if set.
  std::function<void(const Element&)> on_element;
  // The ops of the job's cached prefix (PinnedPrefixOps of its cache policy,
  // cache/cache_policy.h): they run as epoch 0, over epoch 0's split plan, in every epoch, which
  // is what a caching job's Get epochs serve. nullopt: no cached prefix.
  std::optional<int> pinned_prefix_ops;
};

// The iterator of epoch `epoch` of `pipeline` over its full split plan, with its first
// `pinned_prefix_ops` ops (EpochRunOptions::pinned_prefix_ops) run as epoch 0 — what
// RunEpochInProcess pulls from (and Python's granary.local). Counters go to `stats` when not null
// (it must outlive the iterator).
absl::StatusOr<std::unique_ptr<Iterator>> MakeEpochIterator(const Pipeline& pipeline, uint64_t seed,
                                                            int64_t epoch, Env* env,
                                                            std::optional<int> pinned_prefix_ops,
                                                            IteratorStats* stats = nullptr);

// Runs epoch `epoch` of `pipeline` over its full split plan. Errors are the pipeline's,
// unchanged.
absl::StatusOr<EpochResult> RunEpochInProcess(const Pipeline& pipeline, uint64_t seed,
                                              int64_t epoch, Env* env,
                                              const EpochRunOptions& options = {});

}  // namespace granary

#endif  // GRANARY_PIPELINE_LOCAL_RUNNER_H_
