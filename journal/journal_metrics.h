// JournalMetrics: the instruments every dispatcher journal reports (granary_journal_*), the local
// RocksDB journal (journal.h) and the replicated one on etcd (replication/etcd_journal.h) alike,
// so one dashboard reads either.
#ifndef GRANARY_JOURNAL_JOURNAL_METRICS_H_
#define GRANARY_JOURNAL_JOURNAL_METRICS_H_

#include "obs/metrics.h"

namespace granary {

struct JournalMetrics {
  // The instruments in `registry` (which must outlive their use); all null when it is null.
  static JournalMetrics In(MetricRegistry* registry);

  // Records appended; records per group-committed batch; seconds to commit one batch (written
  // and synced locally, or one Txn committed by an etcd quorum); seconds to store a snapshot.
  Counter* appends = nullptr;
  Histogram* group_size = nullptr;
  Histogram* commit_seconds = nullptr;
  Histogram* snapshot_seconds = nullptr;
};

}  // namespace granary

#endif  // GRANARY_JOURNAL_JOURNAL_METRICS_H_
