#include "journal/journal_metrics.h"

namespace granary {

JournalMetrics JournalMetrics::In(MetricRegistry* registry) {
  if (registry == nullptr) return JournalMetrics{};
  return JournalMetrics{
      registry->GetCounter("granary_journal_appends_total", "Records appended to the journal."),
      registry->GetHistogram("granary_journal_group_size", "Records per group-committed batch.",
                             ExponentialBuckets(1, 2, 11)),
      registry->GetHistogram("granary_journal_commit_seconds",
                             "Time to commit one batch of records: written and synced (a local "
                             "journal), or one Txn committed by an etcd quorum (a replicated one).",
                             ExponentialBuckets(0.0001, 2, 16)),
      registry->GetHistogram("granary_journal_snapshot_seconds",
                             "Time to store one state snapshot.", ExponentialBuckets(0.001, 2, 14)),
  };
}

}  // namespace granary
