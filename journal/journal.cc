#include "journal/journal.h"

#include <limits>
#include <optional>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "faultinject/failpoints.h"
#include "journal/format.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"
#include "rocksdb/slice.h"
#include "rocksdb/snapshot.h"
#include "rocksdb/write_batch.h"

namespace granary {

namespace jf = journal_format;

namespace {

rocksdb::Slice ToSlice(absl::string_view s) { return rocksdb::Slice(s.data(), s.size()); }
absl::string_view ToView(const rocksdb::Slice& s) { return absl::string_view(s.data(), s.size()); }

// Maps a RocksDB status onto the closest absl code, prefixing `context`.
absl::Status FromRocks(const rocksdb::Status& s, absl::string_view context) {
  if (s.ok()) return absl::OkStatus();
  const std::string message = absl::StrCat(context, ": ", s.ToString());
  switch (s.code()) {
    case rocksdb::Status::kNotFound:
      return absl::NotFoundError(message);
    case rocksdb::Status::kCorruption:
      return absl::DataLossError(message);
    case rocksdb::Status::kNotSupported:
      return absl::UnimplementedError(message);
    case rocksdb::Status::kInvalidArgument:
      return absl::InvalidArgumentError(message);
    case rocksdb::Status::kIOError:
      if (s.subcode() == rocksdb::Status::kNoSpace) return absl::ResourceExhaustedError(message);
      return absl::InternalError(message);
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTimedOut:
    case rocksdb::Status::kTryAgain:
    case rocksdb::Status::kShutdownInProgress:
      return absl::UnavailableError(message);
    case rocksdb::Status::kAborted:
      return absl::AbortedError(message);
    default:
      return absl::InternalError(message);
  }
}

// Releases a RocksDB snapshot on scope exit.
class ScopedDbSnapshot {
 public:
  explicit ScopedDbSnapshot(rocksdb::DB* db) : db_(db), snapshot_(db->GetSnapshot()) {}
  ~ScopedDbSnapshot() { db_->ReleaseSnapshot(snapshot_); }
  ScopedDbSnapshot(const ScopedDbSnapshot&) = delete;
  ScopedDbSnapshot& operator=(const ScopedDbSnapshot&) = delete;
  const rocksdb::Snapshot* get() const { return snapshot_; }

 private:
  rocksdb::DB* const db_;
  const rocksdb::Snapshot* const snapshot_;
};

// Reads the high-water mark (0 if absent) as of `read_options`.
absl::StatusOr<uint64_t> ReadHighWater(rocksdb::DB* db, const rocksdb::ReadOptions& read_options,
                                       absl::string_view context) {
  std::string value;
  const rocksdb::Status s = db->Get(read_options, jf::kHighWaterKey, &value);
  if (s.IsNotFound()) return 0;
  RETURN_IF_ERROR(FromRocks(s, context));
  absl::StatusOr<absl::string_view> payload = jf::DecodeValue(jf::kHighWaterKey, value);
  if (!payload.ok()) return Annotate(payload.status(), absl::StrCat(context, ": high-water mark"));
  if (payload->size() != 8) {
    return absl::DataLossError(absl::StrCat(context, ": high-water mark: payload of ",
                                            payload->size(), " bytes, expected 8"));
  }
  return jf::DecodeU64(*payload);
}

// Positions `it` on the newest snapshot key and returns its seq, or nullopt if there is none.
absl::StatusOr<std::optional<uint64_t>> SeekNewestSnapshot(rocksdb::Iterator* it,
                                                           absl::string_view context) {
  it->SeekForPrev(ToSlice(jf::SnapshotKey(std::numeric_limits<uint64_t>::max())));
  if (!it->Valid()) {
    RETURN_IF_ERROR(FromRocks(it->status(), context));
    return std::nullopt;
  }
  const absl::string_view key = ToView(it->key());
  if (key.empty() || key[0] != jf::kSnapshotPrefix) return std::nullopt;
  const std::optional<uint64_t> seq = jf::ParseSeqKey(jf::kSnapshotPrefix, key);
  if (!seq.has_value()) {
    return absl::DataLossError(
        absl::StrCat(context, ": malformed snapshot key 0x", absl::BytesToHexString(key)));
  }
  return seq;
}

}  // namespace

struct Journal::Writer {
  enum class Kind { kRecord, kSnapshot };
  Writer(Kind kind, uint64_t seq, std::string payload)
      : kind(kind), seq(seq), payload(std::move(payload)) {}

  const Kind kind;
  uint64_t seq;  // kRecord: assigned by the leader. kSnapshot: the seq the snapshot covers.
  const std::string payload;
  // Set by the leader that wrote this writer's batch (under mu_).
  absl::Status status;
  bool done = false;
  absl::CondVar cv;  // Signalled when done, or when this writer reaches the front.
};

Journal::Journal(std::string dir, const JournalOptions& options, std::unique_ptr<rocksdb::Env> env,
                 rocksdb::DB* db)
    : dir_(std::move(dir)), options_(options), env_(std::move(env)), db_(db) {}

Journal::~Journal() {
  if (db_ != nullptr) db_->Close().PermitUncheckedError();
  db_.reset();
}

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& dir,
                                                       const JournalOptions& options) {
  if (options.max_batch_records < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "journal ", dir, ": max_batch_records must be >= 1, got ", options.max_batch_records));
  }
  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  // Refuse to open on corruption inside the WAL; drop only an incomplete last record (an
  // append that was never acknowledged). The default, kPointInTimeRecovery, would silently stop
  // replay at the corruption and lose the acknowledged records after it.
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  db_options.track_and_verify_wals_in_manifest = true;
  db_options.keep_log_file_num = 4;  // RocksDB's informational LOG files, not the WAL.
  std::unique_ptr<rocksdb::Env> env;
  if (options.file_system != nullptr) {
    env = rocksdb::NewCompositeEnv(options.file_system);
    db_options.env = env.get();
  }
  rocksdb::DB* db = nullptr;
  const rocksdb::Status s = rocksdb::DB::Open(db_options, dir, &db);
  if (!s.ok()) {
    // RocksDB reports a held LOCK file as an IOError mentioning the LOCK file's path, both for
    // another process ("While lock file: D/LOCK: Resource temporarily unavailable") and for
    // this process ("lock hold by current process ... D/LOCK: No locks available").
    if (s.IsIOError() && absl::StrContains(s.ToString(), "/LOCK")) {
      return absl::FailedPreconditionError(absl::StrCat(
          "journal ", dir, ": in use by another open journal (RocksDB LOCK held): ", s.ToString()));
    }
    return FromRocks(s, absl::StrCat("journal ", dir, ": open"));
  }
  std::unique_ptr<Journal> journal(new Journal(dir, options, std::move(env), db));
  RETURN_IF_ERROR(journal->LoadState());
  return journal;
}

absl::Status Journal::LoadState() {
  const std::string context = absl::StrCat("journal ", dir_);
  const rocksdb::ReadOptions read_options;

  // The format marker: written into a fresh (empty) database, required in any other.
  std::string value;
  const rocksdb::Status s = db_->Get(read_options, jf::kFormatKey, &value);
  if (s.IsNotFound()) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options));
    it->SeekToFirst();
    RETURN_IF_ERROR(FromRocks(it->status(), context));
    if (it->Valid()) {
      return absl::FailedPreconditionError(
          absl::StrCat(context, ": not a Granary journal (RocksDB without the format marker)"));
    }
    rocksdb::WriteOptions write_options;
    write_options.sync = options_.sync;
    RETURN_IF_ERROR(FromRocks(
        db_->Put(write_options, jf::kFormatKey, jf::EncodeValue(jf::kFormatKey, jf::kFormatMarker)),
        absl::StrCat(context, ": write format marker")));
  } else {
    RETURN_IF_ERROR(FromRocks(s, context));
    absl::StatusOr<absl::string_view> marker = jf::DecodeValue(jf::kFormatKey, value);
    if (!marker.ok()) return Annotate(marker.status(), absl::StrCat(context, ": format marker"));
    if (*marker != jf::kFormatMarker) {
      return absl::FailedPreconditionError(
          absl::StrCat(context, ": unsupported format \"", absl::CHexEscape(*marker),
                       "\" (this build reads \"", jf::kFormatMarker, "\")"));
    }
  }

  ASSIGN_OR_RETURN(const uint64_t high_water, ReadHighWater(db_.get(), read_options, context));
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options));
  ASSIGN_OR_RETURN(const std::optional<uint64_t> snapshot_seq,
                   SeekNewestSnapshot(it.get(), context));
  absl::MutexLock lock(&mu_);
  last_sequence_ = high_water;
  has_snapshot_ = snapshot_seq.has_value();
  snapshot_seq_ = snapshot_seq.value_or(0);
  return absl::OkStatus();
}

absl::StatusOr<Journal::Recovered> Journal::Recover() const {
  const std::string context = absl::StrCat("journal ", dir_);
  const ScopedDbSnapshot db_snapshot(db_.get());
  rocksdb::ReadOptions read_options;
  read_options.snapshot = db_snapshot.get();
  read_options.verify_checksums = true;
  read_options.fill_cache = false;

  ASSIGN_OR_RETURN(const uint64_t high_water, ReadHighWater(db_.get(), read_options, context));
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_options));

  Recovered out;
  ASSIGN_OR_RETURN(const std::optional<uint64_t> snapshot_seq,
                   SeekNewestSnapshot(it.get(), context));
  if (snapshot_seq.has_value()) {
    const std::string where = absl::StrCat(context, ": snapshot ", *snapshot_seq);
    absl::StatusOr<absl::string_view> payload =
        jf::DecodeValue(ToView(it->key()), ToView(it->value()));
    if (!payload.ok()) return Annotate(payload.status(), where);
    if (*snapshot_seq > high_water) {
      return absl::DataLossError(absl::StrCat(where, ": beyond the high-water mark ", high_water));
    }
    out.has_snapshot = true;
    out.snapshot_seq = *snapshot_seq;
    out.snapshot = std::string(*payload);
  }

  // Records after the snapshot, in key (= sequence) order. Records <= snapshot_seq cannot
  // survive a WriteSnapshot; if some are present anyway they are covered and not read.
  uint64_t expected = out.snapshot_seq + 1;
  for (it->Seek(ToSlice(jf::RecordKey(expected))); it->Valid(); it->Next()) {
    const absl::string_view key = ToView(it->key());
    if (key.empty() || key[0] != jf::kRecordPrefix) break;
    const std::optional<uint64_t> seq = jf::ParseSeqKey(jf::kRecordPrefix, key);
    if (!seq.has_value()) {
      return absl::DataLossError(absl::StrCat(context, ": record ", expected,
                                              ": malformed record key 0x",
                                              absl::BytesToHexString(key)));
    }
    if (*seq != expected) {
      return absl::DataLossError(absl::StrCat(context, ": record ", expected,
                                              ": missing (the next stored record is ", *seq, ")"));
    }
    absl::StatusOr<absl::string_view> payload = jf::DecodeValue(key, ToView(it->value()));
    if (!payload.ok()) return Annotate(payload.status(), absl::StrCat(context, ": record ", *seq));
    out.records.emplace_back(*seq, std::string(*payload));
    ++expected;
  }
  RETURN_IF_ERROR(FromRocks(it->status(), context));

  const uint64_t last = expected - 1;
  if (last < high_water) {
    return absl::DataLossError(absl::StrCat(context, ": record ", last + 1,
                                            ": missing (the high-water mark is ", high_water, ")"));
  }
  if (last > high_water) {
    return absl::DataLossError(absl::StrCat(context, ": record ", high_water + 1,
                                            ": stored beyond the high-water mark ", high_water));
  }
  return out;
}

absl::StatusOr<uint64_t> Journal::Append(std::string record) {
  Writer w(Writer::Kind::kRecord, 0, std::move(record));
  RETURN_IF_ERROR(Submit(&w));
  return w.seq;
}

absl::Status Journal::WriteSnapshot(uint64_t seq, std::string snapshot) {
  Writer w(Writer::Kind::kSnapshot, seq, std::move(snapshot));
  return Submit(&w);
}

absl::Status Journal::Submit(Writer* w) {
  absl::MutexLock lock(&mu_);
  writers_.push_back(w);
  while (!w->done && w != writers_.front()) w->cv.Wait(&mu_);
  if (w->done) return w->status;

  // `w` is the leader. Its group: itself plus the record writers queued right behind it; a
  // snapshot is written alone.
  std::vector<Writer*> group = {w};
  if (w->kind == Writer::Kind::kRecord) {
    for (auto it = writers_.begin() + 1;
         it != writers_.end() && static_cast<int64_t>(group.size()) < options_.max_batch_records &&
         (*it)->kind == Writer::Kind::kRecord;
         ++it) {
      group.push_back(*it);
    }
  }

  absl::Status status;
  uint64_t new_last = last_sequence_;
  if (!failed_.ok()) {
    status = failed_;
  } else if (w->kind == Writer::Kind::kRecord) {
    for (Writer* member : group) member->seq = ++new_last;
  } else if (w->seq > last_sequence_ || (has_snapshot_ && w->seq < snapshot_seq_)) {
    status = absl::InvalidArgumentError(
        absl::StrCat("journal ", dir_, ": snapshot at ", w->seq,
                     ": must lie between the newest snapshot (", has_snapshot_ ? snapshot_seq_ : 0,
                     ") and the last sequence number (", last_sequence_, ")"));
  }

  if (status.ok()) {
    // The group's writers wait until done, so their fields are stable while unlocked; writers
    // arriving meanwhile queue behind this leader.
    mu_.Unlock();
    rocksdb::WriteBatch batch;
    // Puts checksum + payload under `key` without concatenating them first (the batch copies).
    auto put = [&batch](const std::string& key, absl::string_view payload) {
      const std::string header = jf::ValueHeader(key, payload);
      const rocksdb::Slice key_slice(key);
      const rocksdb::Slice value_parts[2] = {rocksdb::Slice(header), ToSlice(payload)};
      return batch.Put(rocksdb::SliceParts(&key_slice, 1), rocksdb::SliceParts(value_parts, 2));
    };
    rocksdb::Status s;
    if (w->kind == Writer::Kind::kRecord) {
      for (Writer* member : group) {
        if (s.ok()) s = put(jf::RecordKey(member->seq), member->payload);
      }
    } else {
      // Older snapshots: [s0, s<seq>). Covered records: [r0, r<seq> + "\0"), i.e. every record
      // key <= r<seq> (record keys are all 9 bytes).
      s = batch.DeleteRange(jf::SnapshotKey(0), jf::SnapshotKey(w->seq));
      if (s.ok()) s = batch.DeleteRange(jf::RecordKey(0), jf::RecordKey(w->seq) + '\0');
      if (s.ok()) s = put(jf::SnapshotKey(w->seq), w->payload);
    }
    // The high-water mark rides along in every batch (a snapshot rewrites it unchanged), so a
    // non-empty journal always has one.
    if (s.ok()) s = put(jf::kHighWaterKey, jf::EncodeU64(new_last));
    if (s.ok()) {
      rocksdb::WriteOptions write_options;
      write_options.sync = options_.sync;
      s = db_->Write(write_options, &batch);
    }
    if (s.ok()) {
      // An injected error: the batch is durable but reported failed (an ambiguous commit).
      const absl::Status injected = HitFailpoint(kJournalMidGroupCommit);
      if (!injected.ok()) s = rocksdb::Status::IOError(std::string(injected.message()));
    }
    mu_.Lock();
    if (!s.ok()) {
      status = FromRocks(s, absl::StrCat("journal ", dir_, ": write"));
      failed_ = absl::FailedPreconditionError(
          absl::StrCat("journal ", dir_,
                       ": unusable after a failed write (reopen and recover): ", s.ToString()));
    } else if (w->kind == Writer::Kind::kRecord) {
      last_sequence_ = new_last;
      ++batches_written_;
    } else {
      has_snapshot_ = true;
      snapshot_seq_ = w->seq;
    }
  }

  for (Writer* member : group) {
    writers_.pop_front();  // The group is the front of the queue, in order.
    if (member == w) continue;
    member->status = status;
    member->done = true;
    member->cv.Signal();
  }
  if (!writers_.empty()) writers_.front()->cv.Signal();
  return status;
}

uint64_t Journal::last_sequence() const {
  absl::MutexLock lock(&mu_);
  return last_sequence_;
}

int64_t Journal::batches_written() const {
  absl::MutexLock lock(&mu_);
  return batches_written_;
}

}  // namespace granary
