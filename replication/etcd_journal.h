// EtcdJournal: the replicated dispatcher's journal, kept in etcd (issue 32; the layout is in
// replication/FORMAT.md). It is the DurableLog (dispatcher/durable_log.h) under every replica's
// DispatcherCore: each replica recovers its state from it and follows the records the leader
// commits; only the replica that leads appends.
//
// Fencing. A replica leads while its election key exists (replication/leader_election.h). Every
// write of a leader — each group of records, each snapshot — is one etcd Txn whose compares
// require that key's create_revision to be the one the replica was elected with, and the next
// record's key to be absent. A deposed leader (its lease expired, say while it was cut off from
// etcd and still believed it led) therefore can never commit: its Txn fails its compares and
// nothing is written. Correctness never depends on clocks or on when a leader notices.
//
// Appends are group-committed: concurrent Appends queue, and one of them commits up to
// max_records_per_txn queued records (and at most max_txn_bytes of them) as one Txn, while the
// rest wait for the next. A record larger than max_txn_bytes (an epoch's plan of many splits)
// is committed alone, in parts: each part a fenced Txn, then its record key, whose value lists
// the parts (FORMAT.md); readers reassemble it.
//
// Error codes of Append and WriteSnapshot, as DurableLog asks:
//   - Unavailable: not written, and never will be — this replica does not lead (or stopped:
//     the message names the leader it knows), the fencing compares failed, or no etcd member
//     could be reached before the request was sent, or etcd refused it (too large, quota).
//   - Unknown (or another code etcd gave after the request was sent): indeterminate — the Txn
//     may have committed. The journal stops leading at once (every later Append is
//     Unavailable); the replica must step down and learn the outcome by recovering.
// When the journal stops leading for either reason, `on_deposed` (given to Lead) runs once.
//
// Thread-safe.
#ifndef GRANARY_REPLICATION_ETCD_JOURNAL_H_
#define GRANARY_REPLICATION_ETCD_JOURNAL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dispatcher/durable_log.h"
#include "etcd/etcd_client.h"
#include "etcd/etcd_watch.h"
#include "journal/journal_metrics.h"
#include "proto/replication.pb.h"

namespace granary {

// The value <prefix>/format holds (replication/FORMAT.md).
inline constexpr uint32_t kEtcdJournalFormatVersion = 1;

struct EtcdJournalOptions {
  // Every key of the journal starts with it ("/granary/prod"); not empty, no trailing '/'.
  std::string prefix;
  // The most records one Txn commits. etcd refuses a Txn of more than its --max-txn-ops (128
  // by default) operations.
  int max_records_per_txn = 100;
  // The most record bytes one Txn carries, and the size of a snapshot chunk and of a large
  // record's part: below etcd's --max-request-bytes (1.5 MiB by default), with room for keys
  // and framing (CheckRecordFits tells at start-up whether etcd takes it).
  int64_t max_txn_bytes = 1 << 20;
  // Where the journal counts its appends, batches, commit latency (each group's Txn through an
  // etcd quorum) and snapshot times (journal/journal_metrics.h: granary_journal_*); nullptr:
  // nowhere. Must outlive the journal.
  MetricRegistry* metrics = nullptr;
};

class EtcdJournal final : public DurableLog {
 public:
  // Opens the journal at options.prefix through `client` (which must outlive it): a prefix
  // with no key becomes a new journal (its format key written); one holding a journal of this
  // format is opened. Errors: FailedPrecondition for a prefix holding keys Granary did not
  // write, or a journal of another format version (naming the prefix and a key); the client's
  // Unavailable, naming the endpoints, when etcd cannot be reached.
  static absl::StatusOr<std::unique_ptr<EtcdJournal>> Open(etcd::EtcdClient* client,
                                                           EtcdJournalOptions options);

  // DurableLog. Recover reads the newest snapshot and every record after it at one etcd
  // revision (recovered_revision()); DataLoss names a snapshot whose chunks do not add up or a
  // missing record.
  absl::StatusOr<Recovered> Recover() const override;
  absl::StatusOr<uint64_t> Append(std::string record) override;
  // Writes the snapshot's chunks, then — in one fenced Txn — its head, deleting the records it
  // covers and the older snapshot; then compacts etcd's history up to that revision.
  absl::Status WriteSnapshot(uint64_t seq, std::string snapshot) override;
  std::string Describe() const override;

  // The etcd revision the last Recover read at: a follower follows from the next one.
  int64_t recovered_revision() const;

  // The newest record's seq (0: none; the snapshot's seq when the records it covers are
  // deleted), read linearizably.
  absl::StatusOr<uint64_t> LastSeq() const;

  // Calls `on_record(seq, record)`, in seq order, for every record committed at a revision from
  // `from_revision` on, from an EtcdWatch's thread (etcd/etcd_watch.h), until the returned
  // watch is destroyed; `on_end` as the watch's (OutOfRange: `from_revision` was compacted —
  // recover from the snapshot). A record key that does not parse ends nothing: it is logged
  // and skipped (FORMAT.md: nothing else writes under <prefix>/log/).
  // A parted record (FORMAT.md) is read back whole before it is delivered; one whose parts
  // cannot be read comes as its error (DataLoss, or the client's).
  using RecordCallback =
      std::function<void(uint64_t seq, const absl::StatusOr<std::string>& record)>;
  absl::StatusOr<std::unique_ptr<etcd::EtcdWatch>> Follow(int64_t from_revision,
                                                          RecordCallback on_record,
                                                          etcd::EtcdWatch::EndCallback on_end);

  // Starts leading: appends from now on are fenced by `election_key` having create revision
  // `election_revision`, and start at seq `next_seq` (LastSeq() + 1, once this replica's state
  // has applied every record). `on_deposed(why)` runs once when the journal stops leading by
  // itself (see the file comment), on the thread whose append found out.
  void Lead(std::string election_key, int64_t election_revision, uint64_t next_seq,
            std::function<void(const absl::Status& why)> on_deposed) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops leading: queued and later appends are refused with Unavailable `why`. Idempotent.
  void StopLeading(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  bool leading() const ABSL_LOCKS_EXCLUDED(mu_);

  // Whether etcd takes a record of `bytes` bytes: writes and deletes a scratch key of that
  // size under the prefix. InvalidArgument naming the size and etcd's --max-request-bytes when
  // it does not (a bound of Granary's, like --max_pipeline_bytes, must fit in one record).
  absl::Status CheckRecordFits(int64_t bytes) const;

  // The key of record `seq`.
  std::string RecordKey(uint64_t seq) const;

 private:
  EtcdJournal(etcd::EtcdClient* client, EtcdJournalOptions options);

  struct Pending {
    std::string record;
    // Set when the record's fate is known.
    bool done = false;
    absl::StatusOr<uint64_t> seq = absl::UnknownError("not committed yet");
  };
  // Commits the queued records at the front (up to the Txn bounds) as one fenced Txn, outside
  // the lock, and marks them done. Called by the Append whose record is first in the queue.
  void CommitFront() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stops leading because of `why` and tells on_deposed_ (outside the lock).
  void Depose(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  // The newest snapshot's head (none: no snapshot yet), and the revision it was read at.
  struct SnapshotHeadRead {
    std::optional<EtcdSnapshotHead> head;
    int64_t revision = 0;
  };
  // DataLoss if the head does not parse.
  absl::StatusOr<SnapshotHeadRead> ReadSnapshotHead() const;
  // Where record `seq`'s parts are, if it is stored in parts; where the chunks of the snapshot
  // covering records 1..seq are.
  std::string PartsPrefix(uint64_t seq) const;
  std::string SnapshotPrefix(uint64_t seq) const;
  // Calls `visit` on every key from `from` to the end of `prefix` as of `revision`, in key
  // order, a page of them per Range; stops at visit's first error.
  absl::Status ForEachKey(std::string from, const std::string& prefix, int64_t revision,
                          const std::function<absl::Status(const mvccpb::KeyValue& kv)>& visit)
      const;
  // The chunks under `chunk_prefix` as of `revision`, joined: `chunks` of them, `bytes` in all,
  // hashing to `xxh64` — else DataLoss naming `what` and what was found.
  absl::StatusOr<std::string> ReadChunks(const std::string& chunk_prefix, int64_t revision,
                                         const std::string& what, uint32_t chunks,
                                         uint64_t bytes, uint64_t xxh64) const;
  // One fenced Txn per max_txn_bytes of `bytes` (at least one), putting chunk i at
  // `chunk_prefix` + i (8 digits).
  std::vector<etcdserverpb::TxnRequest> ChunkTxns(const std::string& chunk_prefix,
                                                  const std::string& bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The record a record key's `value` stands for (reading its parts as of `revision`, 0: the
  // newest). DataLoss naming the record for a value or parts that do not add up.
  absl::StatusOr<std::string> RecordOf(uint64_t seq, const std::string& value,
                                       int64_t revision) const;
  // The Txn compares that fence a leader's write.
  void AddFence(etcdserverpb::TxnRequest& txn) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the fenced `txn`; maps its outcome to the file comment's codes (deposing the journal
  // when it is no longer the leader's or the outcome is unknown). `what` names it in errors.
  absl::StatusOr<etcdserverpb::TxnResponse> FencedTxn(const etcdserverpb::TxnRequest& txn,
                                                      const std::string& what)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The fence to add to a Txn now, or Unavailable when not leading.
  absl::Status CheckLeading() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  etcd::EtcdClient* const client_;
  const EtcdJournalOptions options_;
  const JournalMetrics instruments_;

  mutable absl::Mutex mu_;
  mutable int64_t recovered_revision_ ABSL_GUARDED_BY(mu_) = 0;
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  // Why appends are refused while not leading.
  absl::Status not_leading_ ABSL_GUARDED_BY(mu_);
  std::string election_key_ ABSL_GUARDED_BY(mu_);
  int64_t election_revision_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(const absl::Status&)> on_deposed_ ABSL_GUARDED_BY(mu_);
  // Appends waiting to be committed, oldest first; the first one's Append commits them.
  std::deque<Pending*> queue_ ABSL_GUARDED_BY(mu_);
  // A Txn of appends is in flight (one at a time, in seq order).
  bool committing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace granary

#endif  // GRANARY_REPLICATION_ETCD_JOURNAL_H_
