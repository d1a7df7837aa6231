// DurableLog: the ordered, durable record log under the dispatcher core (dispatcher_core.h),
// and JournalLog, its implementation on the local RocksDB journal (journal/journal.h).
//
// The core assumes only what this interface says, so a replicated log (issue 32: records
// committed through etcd by an elected leader, fenced, and applied by hot standbys as they
// arrive) plugs in as another implementation: Append returns once the record is committed,
// with its position; a log that lost its leadership fails the Append (the core then stops).
#ifndef GRANARY_DISPATCHER_DURABLE_LOG_H_
#define GRANARY_DISPATCHER_DURABLE_LOG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "journal/journal.h"

namespace granary {

// Thread-safe: every method may be called concurrently.
class DurableLog {
 public:
  virtual ~DurableLog() = default;

  // What the log holds: the newest snapshot and every record after it.
  struct Recovered {
    bool has_snapshot = false;
    uint64_t snapshot_seq = 0;  // The snapshot covers records 1..snapshot_seq.
    std::string snapshot;
    // Every record with seq > snapshot_seq, in order, with contiguous seqs.
    std::vector<std::pair<uint64_t, std::string>> records;
  };
  // Errors: DataLoss for a damaged log (naming the record); other codes for I/O errors.
  virtual absl::StatusOr<Recovered> Recover() const = 0;

  // Appends `record` with the next sequence number and returns that number once the record is
  // durable. Errors: Unavailable - the record was not written and never will be (e.g. a full
  // disk); retry later. Any other code - the record is indeterminate (it may be durable): the
  // caller must stop changing state.
  virtual absl::StatusOr<uint64_t> Append(std::string record) = 0;

  // Durably stores `snapshot` as covering every record up to `seq`; the log may then drop
  // them. Errors as Append: Unavailable - not written, retry later; others - stop.
  virtual absl::Status WriteSnapshot(uint64_t seq, std::string snapshot) = 0;

  // Names the log in messages ("journal /var/lib/granary/journal").
  virtual std::string Describe() const = 0;
};

// The local RocksDB journal as a DurableLog.
class JournalLog final : public DurableLog {
 public:
  // `dir` names the journal in messages.
  JournalLog(std::unique_ptr<Journal> journal, std::string dir)
      : journal_(std::move(journal)), dir_(std::move(dir)) {}

  absl::StatusOr<Recovered> Recover() const override;
  absl::StatusOr<uint64_t> Append(std::string record) override;
  absl::Status WriteSnapshot(uint64_t seq, std::string snapshot) override;
  std::string Describe() const override;

 private:
  const std::unique_ptr<Journal> journal_;
  const std::string dir_;
};

}  // namespace granary

#endif  // GRANARY_DISPATCHER_DURABLE_LOG_H_
