#include "pipeline/local_runner.h"

#include "common/status_macros.h"

namespace granary {

absl::StatusOr<std::unique_ptr<Iterator>> MakeEpochIterator(const Pipeline& pipeline, uint64_t seed,
                                                            int64_t epoch, Env* env,
                                                            std::optional<int> pinned_prefix_ops,
                                                            IteratorStats* stats) {
  ASSIGN_OR_RETURN(std::vector<Split> splits, pipeline.EnumerateSplits(env));
  IteratorContext ctx{env, seed, epoch};
  ctx.stats = stats;
  ctx.cached_prefix_ops = pinned_prefix_ops.value_or(0);
  const int64_t plan_epoch = pinned_prefix_ops.has_value() ? 0 : epoch;
  return pipeline.MakeIterator(
      ctx, std::make_unique<PlannedSplitProvider>(pipeline.PlanEpoch(splits, seed, plan_epoch)));
}

absl::StatusOr<EpochResult> RunEpochInProcess(const Pipeline& pipeline, uint64_t seed,
                                              int64_t epoch, Env* env,
                                              const EpochRunOptions& options) {
  const uint64_t start = env->NowMicros();
  IteratorStats stats;
  ASSIGN_OR_RETURN(std::unique_ptr<Iterator> it,
                   MakeEpochIterator(pipeline, seed, epoch, env, options.pinned_prefix_ops, &stats));
  EpochDigest digest(pipeline.batched());
  EpochResult result;
  result.epoch = epoch;
  while (true) {
    Element e;
    bool end = false;
    RETURN_IF_ERROR(it->GetNext(&e, &end));
    if (end) break;
    if (options.digest) digest.Add(e);
    ++result.elements;
    result.bytes += e.ByteSize();
    if (options.on_element) options.on_element(e);
  }
  result.rows = digest.rows();
  result.seconds = (env->NowMicros() - start) / 1e6;
  result.skipped = stats.skipped_elements.load();
  result.digest_line = digest.Line(epoch, 0, result.skipped).ToJson();
  return result;
}

}  // namespace granary
