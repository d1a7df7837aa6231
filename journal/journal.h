// Journal: a durable, append-only log of opaque records with snapshots, stored in one RocksDB.
//
// The dispatcher journals every state change here before applying it (DESIGN.md §3). Records
// are opaque bytes (the dispatcher stores serialized `Update` protos); the journal numbers them
// 1, 2, 3, ... and hands each number back only once the record is durable. The on-disk layout
// is documented in journal/FORMAT.md.
//
// Protocol walkthrough
// --------------------
// Group commit (the writer queue of leveldb's DBImpl::Write). Every Append and WriteSnapshot
// enqueues a `Writer` on `writers_` and waits. The writer at the front of the queue is the
// leader: it takes itself plus the queued record writers behind it (up to
// `max_batch_records`; a snapshot is always written alone), numbers them consecutively after
// `last_sequence_`, releases the mutex, builds one rocksdb::WriteBatch (each record under its
// key plus the new high-water mark) and writes it with WriteOptions.sync. It then re-takes the
// mutex, publishes the new `last_sequence_`, marks every writer of its group done with the
// batch's status, pops them and wakes the next front of the queue, which becomes the next
// leader. Only the leader ever writes, so one synced RocksDB write is in flight at a time and
// N concurrent appends cost about one fsync per batch instead of one per append.
//
// Full disk. A write that fails for lack of space (RocksDB's NoSpace) is not fail-stop: its
// writers get Unavailable ("out of disk space: not written"), nothing else changes, and reads
// keep working. The next write first reopens RocksDB (RocksDB cannot resume in place after a
// failed WAL write), which drops whatever the failed write left in the WAL, and checks that the
// journal still ends at the last acknowledged record; it is not attempted (Unavailable again)
// while the free space is below the WALs' size plus 1 MiB. So a record whose Append returned
// Unavailable is never followed by a successful write while it could still be recovered: if
// the reopen finds it after all (a file system that reports the full disk at fsync, with the
// bytes already written), the journal goes fail-stop instead of reusing its number, and a
// restart recovers it; likewise if the process dies before the next write.
//
// Fail-stop. If a write fails otherwise (e.g. the WAL fsync fails), every writer of that batch
// gets the error and the journal records it; every later Append or WriteSnapshot fails with
// FailedPrecondition without touching RocksDB. The process must reopen the journal (normally:
// restart) and Recover(). A record whose Append failed is *indeterminate*: it may or may not be
// present after recovery (its bytes may have reached the WAL before the fsync failed), so a
// caller must not have acted on it, and must tolerate seeing it replayed.
//
// Deleted under it. After every successful batch, before acknowledging it, the leader checks
// that the journal's files are still the ones it writes: its directory still exists under its
// name as the same directory (stat: device and inode as at Open), the high-water file is not
// unlinked (fstat's st_nlink) and RocksDB's current WAL is still there. If not (`rm -rf` of the
// directory, a deleted WAL), the batch's writers get Unavailable naming the directory and what
// went, and so does every later Append or WriteSnapshot (fail-stop): the records could never
// be recovered. When the directory itself is gone, the journal recreates it holding only the
// lost-journal marker GRANARY-JOURNAL-LOST (naming the records 1..N that were acknowledged),
// also when the deletion is first noticed at close, so that a restart over the empty directory
// is refused rather than silently starting a new, empty cluster (Open, FORMAT.md).
//
// Snapshots. WriteSnapshot(S, state) writes, in ONE WriteBatch: the snapshot under key S, a
// range deletion of every older snapshot, and a range deletion of every record <= S. RocksDB
// applies a batch atomically, so after any crash the journal holds either the old snapshot and
// all records, or the new snapshot and only the records > S: recovery always reads one
// snapshot plus the tail.
//
// Recovery. Recover() reads, from one consistent RocksDB snapshot, the newest journal snapshot
// S and then records S+1, S+2, ... in key order, verifying each value's checksum (which covers
// the key, so a value copied under another key is detected) and that the numbers are
// contiguous and end exactly at the high-water mark written with every batch (so a lost tail is
// detected too). Any violation is DataLoss naming the sequence number; nothing is skipped.
//
// Lost files. The high-water mark is kept a second time outside RocksDB, in the high-water file
// (journal/high_water_file.h), updated without fsync after every batch: a deleted or truncated
// WAL, a truncated MANIFEST, or any other loss of acknowledged records fails Open with DataLoss
// naming the WAL and the records. RocksDB itself is opened with paranoid_checks,
// WALRecoveryMode::kAbsoluteConsistency (an incomplete last WAL record is accepted, and dropped,
// only when the high-water file shows it was never acknowledged) and
// track_and_verify_wals_in_manifest. See journal/FORMAT.md, "The high-water file".
#ifndef GRANARY_JOURNAL_JOURNAL_H_
#define GRANARY_JOURNAL_JOURNAL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "journal/high_water_file.h"
#include "journal/journal_metrics.h"
#include "obs/metrics.h"

namespace rocksdb {
class DB;
class Env;
class FileSystem;
}  // namespace rocksdb

namespace granary {

class SyncLedger;

struct JournalOptions {
  // WriteOptions.sync for every batch. Keep true wherever durability matters; false only for
  // tests and benchmarks that measure something else.
  bool sync = true;
  // At most this many records per group-committed batch. 1 means one synced write per append
  // (for comparison in benchmarks). REQUIRES: >= 1.
  int64_t max_batch_records = 1024;
  // For fault-injection tests only: RocksDB performs all file I/O through this file system
  // (see journal/fault_injection_fs.h). nullptr = the default POSIX file system.
  std::shared_ptr<rocksdb::FileSystem> file_system;
  // For power-loss tests and `granary chaos`: RocksDB's files (through a LedgerFileSystem over
  // file_system, journal/ledger_fs.h) and the high-water file record their durability events
  // in this ledger (common/sync_ledger.h). nullptr = none. Must outlive the journal.
  SyncLedger* sync_ledger = nullptr;
  // Open a directory holding the lost-journal marker (see "Deleted under it") anyway: the
  // marker is deleted and the directory opened as it is — empty, a new journal. Only for an
  // operator who means to start over (`granary dispatcher --new_cluster`).
  bool accept_lost = false;
  // Where the journal counts its appends, batches (group sizes), commit latency and snapshot
  // times (granary_journal_*); nullptr: nowhere. Must outlive the journal.
  MetricRegistry* metrics = nullptr;
};

// Thread-safe: every method may be called concurrently, except that the destructor REQUIRES
// that no other call is in progress.
class Journal {
 public:
  // Opens or creates the journal in `dir` (created if missing; its parent must exist).
  // Errors:
  //   FailedPrecondition - `dir` is in use by another open Journal, in this or another process
  //     (RocksDB's LOCK file); the message names `dir` and says it is in use. Nothing is
  //     modified. Also: `dir` holds a RocksDB that is not a Granary journal of this format; or
  //     `dir` holds the lost-journal marker (its journal was deleted while open) and not
  //     options.accept_lost: the message names the marker and quotes it.
  //   DataLoss - acknowledged records are gone or damaged: "journal D: WAL 000009.log missing:
  //     records 6..10 lost (...)" (also "truncated or damaged"); the high-water file is missing
  //     or damaged; the format marker is gone from a journal that has the high-water file (e.g.
  //     a truncated MANIFEST); RocksDB reports corruption; the high-water mark's checksum does
  //     not match. A refused open is repeatable.
  //   InvalidArgument - options.max_batch_records < 1.
  //   Other codes - I/O errors from RocksDB.
  static absl::StatusOr<std::unique_ptr<Journal>> Open(const std::string& dir,
                                                       const JournalOptions& options);

  // Closes RocksDB. REQUIRES: no call in progress on this journal.
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  struct Recovered {
    bool has_snapshot = false;
    uint64_t snapshot_seq = 0;  // The snapshot covers records 1..snapshot_seq.
    std::string snapshot;
    // Every record with seq > snapshot_seq, in order; seqs are contiguous from snapshot_seq + 1
    // to last_sequence().
    std::vector<std::pair<uint64_t, std::string>> records;
  };
  // Reads the newest snapshot and every record after it, from one consistent point in time
  // (concurrent Appends are either wholly included or not). This is also everything the
  // journal stores that matters (older snapshots and covered records are deleted atomically
  // with the snapshot write), so `granary journal dump` prints its result.
  // Errors: DataLoss naming the sequence number, e.g. "journal /d: record 17: checksum
  // mismatch", for: a checksum mismatch, a value shorter than its checksum, a missing record
  // (gap), a missing or extra record at the tail (compared with the high-water mark), a
  // malformed key. Also DataLoss for RocksDB-detected corruption; other codes for I/O errors;
  // Unavailable if a reopen after a full disk failed (until the next write reopens it).
  absl::StatusOr<Recovered> Recover() const;

  // Appends `record` with the next sequence number and returns that number once the record is
  // durable (written with WriteOptions.sync when options.sync). Concurrent Appends are
  // group-committed (see the walkthrough above).
  // Errors: Unavailable - out of disk space: the record was not written (see "Full disk");
  // retry later. Also Unavailable, for good, once the journal's files were found deleted (see
  // "Deleted under it"). Any other code - the RocksDB write error of this record's batch (the
  // record is then indeterminate); FailedPrecondition if an earlier write failed (fail-stop).
  absl::StatusOr<uint64_t> Append(std::string record);

  // Durably stores `snapshot` as covering every record up to and including `seq`, and deletes
  // every record <= seq and every older snapshot, atomically in one batch. Writing a snapshot
  // at the current snapshot's seq replaces it.
  // Errors: InvalidArgument unless (newest snapshot seq, or 0) <= seq <= last_sequence();
  // otherwise as Append (Unavailable on a full disk; else the write error, then
  // FailedPrecondition forever after).
  absl::Status WriteSnapshot(uint64_t seq, std::string snapshot);

  // The sequence number of the last durable record (0 if none was ever appended).
  uint64_t last_sequence() const;

  // Statistics: the number of RocksDB WriteBatches written for Appends since Open (snapshots
  // are not counted). Fewer batches than appends means group commit took effect.
  int64_t batches_written() const;

  const std::string& dir() const { return dir_; }

 private:
  struct Writer;

  Journal(std::string dir, const JournalOptions& options, std::unique_ptr<rocksdb::Env> env,
          rocksdb::DB* db);

  // Queues `w`, waits until it is written (as a member of some leader's batch, or as the leader
  // itself) and returns its status.
  absl::Status Submit(Writer* w) ABSL_LOCKS_EXCLUDED(mu_);
  // Checks the format marker and the high-water mark against `mark` (the high-water file as
  // found before RocksDB opened; `wals_before` the WAL files then, for messages), writes the
  // marker into a fresh journal, reads the high-water mark and the newest snapshot's seq into
  // the members below and anchors the high-water file.
  absl::Status LoadState(const std::optional<HighWater>& mark,
                         const std::map<uint64_t, uint64_t>& wals_before);
  // Makes the high-water file durably hold `seq` and the current WAL, and opens it.
  absl::Status AnchorHighWater(uint64_t seq);
  // What of the journal's files was deleted or replaced since Open ("" if nothing): see
  // "Deleted under it". Called by the leader (or the destructor) only.
  std::string WhatWasDeleted();
  // After WhatWasDeleted found `what`: recreates the directory, if it is gone, holding only the
  // lost-journal marker saying records 1..`acknowledged` were lost (best effort: logged).
  void MarkLost(const std::string& what, uint64_t acknowledged);
  // Called by the leader before its write while out_of_space_: reopens RocksDB, which drops
  // what the failed write left in the WAL, and checks that the journal still ends at
  // `last_acknowledged`. Unavailable while the disk is still too full; FailedPrecondition if
  // the failed records turn out to be in the journal; other errors as Open.
  absl::Status ReopenAfterNoSpace(uint64_t last_acknowledged) ABSL_LOCKS_EXCLUDED(mu_, db_mu_);

  const std::string dir_;
  const JournalOptions options_;
  std::unique_ptr<rocksdb::Env> env_;  // Non-null only with options.file_system; outlives db_.
  // Replaced only by the leader in ReopenAfterNoSpace (holding db_mu_ as a writer; it is null if
  // that reopen failed), so the leader uses it without db_mu_; Recover holds db_mu_ as a reader.
  mutable absl::Mutex db_mu_;
  std::unique_ptr<rocksdb::DB> db_;
  // Updated by the leader after every batch (journal/high_water_file.h); only one leader runs
  // at a time, so these need no lock.
  std::unique_ptr<HighWaterFile> high_water_file_;
  uint64_t wal_number_ = 0;  // RocksDB's WAL as of the last anchor or snapshot.
  // The directory's (device, inode) at Open; set before the journal is shared.
  std::pair<uint64_t, uint64_t> dir_identity_;

  mutable absl::Mutex mu_;
  std::deque<Writer*> writers_ ABSL_GUARDED_BY(mu_);  // Front = the current leader.
  uint64_t last_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t snapshot_seq_ ABSL_GUARDED_BY(mu_) = 0;  // Meaningful if has_snapshot_.
  bool has_snapshot_ ABSL_GUARDED_BY(mu_) = false;
  int64_t batches_written_ ABSL_GUARDED_BY(mu_) = 0;
  // A write failed for lack of disk space; the next leader resumes before writing.
  bool out_of_space_ ABSL_GUARDED_BY(mu_) = false;
  // After a failed write: the FailedPrecondition every later write returns (fail-stop); after
  // the files were found deleted, Unavailable.
  absl::Status failed_ ABSL_GUARDED_BY(mu_);

  // Of options_.metrics (all null without it).
  const JournalMetrics instruments_;
};

}  // namespace granary

#endif  // GRANARY_JOURNAL_JOURNAL_H_
