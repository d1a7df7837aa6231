#include "journal/journal.h"

#include <sys/stat.h>

#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/failpoints.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "journal/format.h"
#include "journal/ledger_fs.h"
#include "journal/rocksdb_logger.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/iterator.h"
#include "rocksdb/listener.h"
#include "rocksdb/options.h"
#include "rocksdb/slice.h"
#include "rocksdb/snapshot.h"
#include "rocksdb/transaction_log.h"
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
      if (s.IsNoSpace()) {
        return absl::UnavailableError(absl::StrCat(context, ": out of disk space: ", s.ToString()));
      }
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

// Turns off RocksDB's automatic recovery from background errors (after a full disk, RocksDB
// would poll for free space and resume by itself): the journal resumes RocksDB itself, at the
// next write, after checking what the failed write left behind (Journal::ResumeAfterNoSpace).
class ManualRecoveryListener : public rocksdb::EventListener {
 public:
  const char* Name() const override { return "GranaryManualRecovery"; }
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason /*reason*/, rocksdb::Status /*bg_error*/,
                            bool* auto_recovery) override {
    *auto_recovery = false;
  }
};

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
    : dir_(std::move(dir)),
      options_(options),
      env_(std::move(env)),
      db_(db),
      instruments_(JournalMetrics::In(options.metrics)) {}

Journal::~Journal() {
  absl::MutexLock lock(&mu_);
  if (high_water_file_ != nullptr && failed_.ok()) {
    if (const std::string deleted = WhatWasDeleted(); !deleted.empty()) {
      MarkLost(deleted, last_sequence_);
    } else {
      // A clean close makes the mark durable (appends only wrote it to the page cache).
      const absl::Status s = high_water_file_->Update({last_sequence_, wal_number_}, /*sync=*/true);
      if (!s.ok()) LOG(WARNING) << "journal " << dir_ << ": " << s;
    }
  }
  if (db_ != nullptr) db_->Close().PermitUncheckedError();
  db_.reset();
}

namespace {

// RocksDB's name for WAL `number`, e.g. "000012.log".
std::string WalName(uint64_t number) {
  std::string digits = absl::StrCat(number);
  if (digits.size() < 6) digits.insert(0, 6 - digits.size(), '0');
  return absl::StrCat(digits, ".log");
}

// The WAL files in `dir` (number -> size in bytes), as found before RocksDB opens it.
std::map<uint64_t, uint64_t> ListWals(const std::string& dir) {
  std::map<uint64_t, uint64_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    uint64_t number;
    if (!absl::EndsWith(name, ".log") ||
        !absl::SimpleAtoi(absl::string_view(name).substr(0, name.size() - 4), &number)) {
      continue;
    }
    std::error_code size_ec;
    const uintmax_t size = entry.file_size(size_ec);
    out[number] = size_ec ? 0 : size;
  }
  return out;
}

// The number of the WAL RocksDB is writing (0 if it cannot tell).
// The (device, inode) of the directory `dir`; nullopt if there is none under that name.
std::optional<std::pair<uint64_t, uint64_t>> DirIdentity(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return std::make_pair(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
}

uint64_t CurrentWalNumber(rocksdb::DB* db) {
  std::unique_ptr<rocksdb::LogFile> wal;
  if (!db->GetCurrentWalFile(&wal).ok() || wal == nullptr) return 0;
  return wal->LogNumber();
}

// Opens `dir` read-only with `mode` (changing nothing on disk) and returns its high-water key.
absl::StatusOr<uint64_t> ReadOnlyHighWater(const rocksdb::Options& base, const std::string& dir,
                                           rocksdb::WALRecoveryMode mode) {
  rocksdb::Options options = base;
  options.wal_recovery_mode = mode;
  rocksdb::DB* raw = nullptr;
  RETURN_IF_ERROR(FromRocks(rocksdb::DB::OpenForReadOnly(options, dir, &raw), "read-only open"));
  std::unique_ptr<rocksdb::DB> db(raw);
  return ReadHighWater(db.get(), rocksdb::ReadOptions(), "read-only open");
}

// "journal D: WAL 000012.log missing: records 6..10 lost (...)".
absl::Status LossError(const std::string& dir, const HighWater& mark, uint64_t held,
                       const std::map<uint64_t, uint64_t>& wals_before, absl::string_view detail) {
  std::string wal;
  if (mark.wal_number == 0) {
    wal = "the WAL";
  } else if (auto it = wals_before.find(mark.wal_number); it == wals_before.end()) {
    wal = absl::StrCat("WAL ", WalName(mark.wal_number), " missing");
  } else {
    wal = absl::StrCat("WAL ", WalName(mark.wal_number), " truncated or damaged (", it->second,
                       " bytes)");
  }
  return absl::DataLossError(absl::StrCat(
      "journal ", dir, ": ", wal, ": records ", held + 1, "..", mark.seq, " lost (",
      jf::kHighWaterFileName, " vouches for records 1..", mark.seq, ", RocksDB holds ",
      held == 0 ? "none" : absl::StrCat("1..", held), ")", detail.empty() ? "" : "; ", detail));
}

// The value stored under kHighWaterFileKey.
std::string HighWaterFileKeyValue() {
  return jf::EncodeValue(jf::kHighWaterFileKey, jf::kHighWaterFileName);
}

// RocksDB's options for the journal in `dir`; `env` may be null (the default).
rocksdb::Options DbOptions(const std::string& dir, rocksdb::Env* env) {
  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  db_options.paranoid_checks = true;
  // Any damage to the WAL, even an incomplete last record, refuses the first open attempt; an
  // incomplete last record is then accepted only if the high-water file shows that no
  // acknowledged record was in it (OpenDb). The default, kPointInTimeRecovery, would silently
  // stop replay at the damage and lose the acknowledged records after it.
  db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kAbsoluteConsistency;
  db_options.track_and_verify_wals_in_manifest = true;
  db_options.listeners.push_back(std::make_shared<ManualRecoveryListener>());
  // RocksDB's informational log goes to glog, not to a LOG file on the journal's disk, whose
  // writer aborts the process after a failed write (journal/rocksdb_logger.h).
  db_options.info_log = std::make_shared<RocksDbGlogLogger>(absl::StrCat("rocksdb ", dir, ": "));
  if (env != nullptr) db_options.env = env;
  return db_options;
}

// Opens RocksDB in `dir`. `mark` and `wals_before` are the high-water file and the WAL files as
// found before (for judging and naming damage, see FORMAT.md "Opening", step 2).
absl::StatusOr<std::unique_ptr<rocksdb::DB>> OpenDb(
    const std::string& dir, rocksdb::Env* env, const std::optional<HighWater>& mark,
    const std::map<uint64_t, uint64_t>& wals_before) {
  const std::string context = absl::StrCat("journal ", dir);
  rocksdb::Options db_options = DbOptions(dir, env);
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, dir, &db);
  // RocksDB reports a held LOCK file as an IOError mentioning the LOCK file's path, both for
  // another process ("While lock file: D/LOCK: Resource temporarily unavailable") and for this
  // process ("lock hold by current process ... D/LOCK: No locks available").
  if (s.IsIOError() && absl::StrContains(s.ToString(), "/LOCK")) {
    return absl::FailedPreconditionError(absl::StrCat(
        context, ": in use by another open journal (RocksDB LOCK held): ", s.ToString()));
  }
  if (s.IsCorruption()) {
    // Which records are affected? Read-only opens change nothing on disk.
    const uint64_t vouched = mark.has_value() ? mark->seq : 0;
    absl::StatusOr<uint64_t> tail =
        ReadOnlyHighWater(db_options, dir, rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords);
    if (tail.ok() && *tail >= vouched) {
      // Only an incomplete last WAL record, beyond every acknowledged record: a write a crash
      // (or a full disk) interrupted before it was acknowledged. Drop it.
      LOG(WARNING) << context << ": dropping an incomplete last WAL record (never acknowledged: "
                   << "the journal vouches for records 1.." << vouched
                   << ", all present): " << s.ToString();
      db_options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
      s = rocksdb::DB::Open(db_options, dir, &db);
    } else {
      absl::StatusOr<uint64_t> intact =
          tail.ok()
              ? tail
              : ReadOnlyHighWater(db_options, dir, rocksdb::WALRecoveryMode::kPointInTimeRecovery);
      if (intact.ok() && mark.has_value() && *intact < vouched) {
        return LossError(dir, *mark, *intact, wals_before, absl::StrCat("RocksDB: ", s.ToString()));
      }
      if (intact.ok()) {
        return absl::DataLossError(absl::StrCat(context, ": RocksDB: ", s.ToString(),
                                                ": records after ", *intact, " unreadable"));
      }
    }
  }
  if (!s.ok()) return FromRocks(s, absl::StrCat(context, ": open"));
  return std::unique_ptr<rocksdb::DB>(db);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& dir,
                                                       const JournalOptions& options) {
  if (options.max_batch_records < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "journal ", dir, ": max_batch_records must be >= 1, got ", options.max_batch_records));
  }
  std::shared_ptr<rocksdb::FileSystem> file_system = options.file_system;
  if (options.sync_ledger != nullptr) {
    file_system = std::make_shared<LedgerFileSystem>(
        file_system != nullptr ? file_system : rocksdb::FileSystem::Default(), options.sync_ledger);
  }
  std::unique_ptr<rocksdb::Env> env;
  if (file_system != nullptr) env = rocksdb::NewCompositeEnv(file_system);

  // Created here rather than by RocksDB, which logs an error when it finds no directory.
  std::error_code mkdir_error;
  std::filesystem::create_directory(dir, mkdir_error);  // RocksDB reports what went wrong.

  const std::string lost_marker = absl::StrCat(dir, "/", jf::kLostMarkerFileName);
  std::error_code exists_error;
  if (std::filesystem::exists(lost_marker, exists_error)) {
    const absl::StatusOr<std::string> read = ReadFileToString(Env::Default(), lost_marker);
    const std::string said(
        absl::StripTrailingAsciiWhitespace(read.ok() ? *read : read.status().ToString()));
    if (!options.accept_lost) {
      return absl::FailedPreconditionError(absl::StrCat(
          "journal ", dir, ": ", jf::kLostMarkerFileName, " says: \"", said,
          "\". Refusing to start an empty journal in its place: restore the journal directory "
          "from a backup (without ",
          jf::kLostMarkerFileName,
          "), or start a new, empty cluster deliberately (granary dispatcher --new_cluster)"));
    }
    LOG(WARNING) << "journal " << dir << ": starting over although " << jf::kLostMarkerFileName
                 << " says: " << said;
    RETURN_IF_ERROR(Env::Default()->DeleteFile(lost_marker));
  }

  // Evidence gathered before RocksDB touches the directory.
  absl::StatusOr<std::optional<HighWater>> mark =
      HighWaterFile::Read(absl::StrCat(dir, "/", jf::kHighWaterFileName));
  if (!mark.ok()) return Annotate(mark.status(), absl::StrCat("journal ", dir));
  const std::map<uint64_t, uint64_t> wals_before = ListWals(dir);

  ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::DB> db, OpenDb(dir, env.get(), *mark, wals_before));
  std::unique_ptr<Journal> journal(new Journal(dir, options, std::move(env), db.release()));
  RETURN_IF_ERROR(journal->LoadState(*mark, wals_before));
  const std::optional<std::pair<uint64_t, uint64_t>> identity = DirIdentity(dir);
  if (!identity.has_value()) {
    return absl::InternalError(absl::StrCat("journal ", dir, ": not a directory after opening"));
  }
  journal->dir_identity_ = *identity;
  return journal;
}

absl::Status Journal::AnchorHighWater(uint64_t seq) {
  absl::StatusOr<std::unique_ptr<HighWaterFile>> file = HighWaterFile::Anchor(
      absl::StrCat(dir_, "/", jf::kHighWaterFileName), {seq, CurrentWalNumber(db_.get())},
      options_.sync_ledger);
  if (!file.ok()) return Annotate(file.status(), absl::StrCat("journal ", dir_));
  high_water_file_ = std::move(file).value();
  return absl::OkStatus();
}

std::string Journal::WhatWasDeleted() {
  const std::optional<std::pair<uint64_t, uint64_t>> identity = DirIdentity(dir_);
  if (!identity.has_value()) return "the journal directory was deleted";
  if (*identity != dir_identity_) return "the journal directory was replaced by another";
  if (high_water_file_ != nullptr && high_water_file_->Unlinked()) {
    return absl::StrCat(jf::kHighWaterFileName, " was deleted");
  }
  if (db_ != nullptr) {
    std::unique_ptr<rocksdb::LogFile> wal;
    const rocksdb::Status s = db_->GetCurrentWalFile(&wal);  // Looks the WAL up by its name.
    if (s.IsNotFound() || s.IsPathNotFound()) {
      return absl::StrCat("the current WAL was deleted (", s.ToString(), ")");
    }
  }
  return "";
}

void Journal::MarkLost(const std::string& what, uint64_t acknowledged) {
  LOG(ERROR) << "journal " << dir_ << ": " << what << " while the journal was open";
  std::error_code error;
  // An existing directory (replaced, or only a file of it deleted) is left alone: it may be a
  // restored copy, and Open finds a lost file by the high-water file.
  if (!std::filesystem::create_directory(dir_, error)) return;
  const std::string marker = absl::StrCat(dir_, "/", jf::kLostMarkerFileName);
  absl::Status written = WriteStringToFile(
      Env::Default(), marker,
      absl::StrCat(what, " while a journal had it open (noticed at ",
                   absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()),
                   "); records 1..", acknowledged, " had been acknowledged and are lost\n"),
      /*sync=*/true);
  if (written.ok()) written = Env::Default()->SyncDir(dir_);
  if (!written.ok()) LOG(ERROR) << "journal " << dir_ << ": " << written;
}

absl::Status Journal::LoadState(const std::optional<HighWater>& mark,
                                const std::map<uint64_t, uint64_t>& wals_before) {
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
      if (mark.has_value()) {
        // The high-water file is created before the marker: this was a Granary journal.
        return absl::DataLossError(absl::StrCat(
            context, ": the format marker is gone although ", jf::kHighWaterFileName,
            " vouches for records 1..", mark->seq,
            ": RocksDB lost files (a truncated MANIFEST, a deleted WAL or table file)"));
      }
      return absl::FailedPreconditionError(
          absl::StrCat(context, ": not a Granary journal (RocksDB without the format marker)"));
    }
    if (mark.has_value() && mark->seq > 0) return LossError(dir_, *mark, 0, wals_before, "");
    // A fresh journal: the high-water file first, so that a marker never exists without it.
    RETURN_IF_ERROR(AnchorHighWater(0));
    rocksdb::WriteBatch batch;
    rocksdb::Status put =
        batch.Put(jf::kFormatKey, jf::EncodeValue(jf::kFormatKey, jf::kFormatMarker));
    if (put.ok()) put = batch.Put(jf::kHighWaterFileKey, HighWaterFileKeyValue());
    rocksdb::WriteOptions write_options;
    write_options.sync = options_.sync;
    if (put.ok()) put = db_->Write(write_options, &batch);
    RETURN_IF_ERROR(FromRocks(put, absl::StrCat(context, ": write format marker")));
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
  if (high_water_file_ == nullptr) {  // Not a fresh journal.
    // Does RocksDB say the high-water file exists? (Not in journals older than the file.)
    std::string file_key;
    const rocksdb::Status has_file = db_->Get(read_options, jf::kHighWaterFileKey, &file_key);
    if (!has_file.IsNotFound()) RETURN_IF_ERROR(FromRocks(has_file, context));
    if (!mark.has_value() && has_file.ok()) {
      return absl::DataLossError(absl::StrCat(
          context, ": ", jf::kHighWaterFileName, " missing (RocksDB holds records 1..", high_water,
          "; without the file a lost WAL cannot be told from an idle journal)"));
    }
    if (mark.has_value() && mark->seq > high_water) {
      return LossError(dir_, *mark, high_water, wals_before, "");
    }
    if (!mark.has_value()) {
      LOG(WARNING) << context << ": creating " << jf::kHighWaterFileName
                   << " (a journal written before Granary kept it)";
    }
    // Re-anchor: the mark as of now, with the WAL RocksDB writes next.
    RETURN_IF_ERROR(AnchorHighWater(high_water));
    if (!has_file.ok()) {
      rocksdb::WriteOptions write_options;
      write_options.sync = options_.sync;
      RETURN_IF_ERROR(
          FromRocks(db_->Put(write_options, jf::kHighWaterFileKey, HighWaterFileKeyValue()),
                    absl::StrCat(context, ": write the high-water file key")));
    }
  }
  absl::MutexLock lock(&mu_);
  last_sequence_ = high_water;
  has_snapshot_ = snapshot_seq.has_value();
  snapshot_seq_ = snapshot_seq.value_or(0);
  wal_number_ = CurrentWalNumber(db_.get());
  return absl::OkStatus();
}

absl::StatusOr<Journal::Recovered> Journal::Recover() const {
  const std::string context = absl::StrCat("journal ", dir_);
  absl::ReaderMutexLock db_lock(&db_mu_);
  if (db_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat(context, ": closed after a full disk, reopened at the next write"));
  }
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
  // RocksDB verifies whole blocks: the damage is in record `expected` or a later one.
  RETURN_IF_ERROR(FromRocks(it->status(), absl::StrCat(context, ": record ", expected,
                                                       " (or a later one in the same block)")));

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
    const bool resume = out_of_space_;
    const uint64_t last_acknowledged = last_sequence_;
    mu_.Unlock();
    // After a write failed for lack of space: make sure it left nothing behind first — unless
    // the journal's files were deleted meanwhile (to free space, say): reopening would create a
    // new, empty journal in their place.
    std::string deleted = resume ? WhatWasDeleted() : "";
    const absl::Status resumed =
        resume && deleted.empty() ? ReopenAfterNoSpace(last_acknowledged) : absl::OkStatus();
    const absl::Time write_start = absl::Now();
    rocksdb::Status s;
    if (!resumed.ok() || !deleted.empty()) s = rocksdb::Status::Aborted("not resumed");
    rocksdb::WriteBatch batch;
    // Puts checksum + payload under `key` without concatenating them first (the batch copies).
    auto put = [&batch](const std::string& key, absl::string_view payload) {
      const std::string header = jf::ValueHeader(key, payload);
      const rocksdb::Slice key_slice(key);
      const rocksdb::Slice value_parts[2] = {rocksdb::Slice(header), ToSlice(payload)};
      return batch.Put(rocksdb::SliceParts(&key_slice, 1), rocksdb::SliceParts(value_parts, 2));
    };
    if (!s.ok()) {
      // Not resumed: nothing to write.
    } else if (w->kind == Writer::Kind::kRecord) {
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
      // The batch is durable: the high-water file may now vouch for it. Appends leave the
      // update in the page cache (no second fsync per batch); a snapshot syncs it. A failed
      // update leaves an older mark, which only weakens detection (FORMAT.md).
      const bool snapshot = w->kind == Writer::Kind::kSnapshot;
      if (snapshot) wal_number_ = CurrentWalNumber(db_.get());
      const absl::Status marked = high_water_file_->Update({new_last, wal_number_}, snapshot);
      if (!marked.ok()) LOG(WARNING) << "journal " << dir_ << ": " << marked;
    }
    // Written (or failed) perhaps into files no longer the journal's: then nothing of it is
    // acknowledged, now or ever.
    if (deleted.empty() && resumed.ok()) deleted = WhatWasDeleted();
    if (!deleted.empty()) MarkLost(deleted, last_acknowledged);
    if (s.ok()) {
      // An injected error: the batch is durable but reported failed (an ambiguous commit).
      const absl::Status injected = HitFailpoint(kJournalMidGroupCommit);
      if (!injected.ok()) s = rocksdb::Status::IOError(std::string(injected.message()));
    }
    mu_.Lock();
    if (!resumed.ok()) {
      status = resumed;
      if (!absl::IsUnavailable(resumed)) {
        failed_ = absl::FailedPreconditionError(absl::StrCat(
            "journal ", dir_,
            ": unusable after failing to resume from a full disk: ", resumed.message()));
      }
    } else if (!deleted.empty()) {
      status = absl::UnavailableError(absl::StrCat(
          "journal ", dir_, ": ", deleted, " while in use: nothing more is recorded, records 1..",
          last_acknowledged,
          " are lost (restore the journal directory from a backup and restart the dispatcher)"));
      failed_ = status;
    } else if (s.IsNoSpace()) {
      // Nothing of this batch is (or, once resumed, ever will be) in the journal: retryable.
      out_of_space_ = true;
      status = absl::UnavailableError(absl::StrCat(
          "journal ", dir_,
          ": out of disk space: not written (retry once space is freed): ", s.ToString()));
    } else if (!s.ok()) {
      status = FromRocks(s, absl::StrCat("journal ", dir_, ": write"));
      // Unavailable is reserved for "not written, retry"; this batch is indeterminate.
      if (absl::IsUnavailable(status)) status = absl::InternalError(status.message());
      failed_ = absl::FailedPreconditionError(
          absl::StrCat("journal ", dir_,
                       ": unusable after a failed write (reopen and recover): ", s.ToString()));
    } else if (w->kind == Writer::Kind::kRecord) {
      out_of_space_ = false;
      last_sequence_ = new_last;
      ++batches_written_;
      if (instruments_.appends != nullptr) {
        instruments_.appends->Add(static_cast<double>(group.size()));
        instruments_.group_size->Observe(static_cast<double>(group.size()));
        instruments_.commit_seconds->Observe(absl::ToDoubleSeconds(absl::Now() - write_start));
      }
    } else {
      out_of_space_ = false;
      has_snapshot_ = true;
      snapshot_seq_ = w->seq;
      if (instruments_.snapshot_seconds != nullptr) {
        instruments_.snapshot_seconds->Observe(absl::ToDoubleSeconds(absl::Now() - write_start));
      }
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

absl::Status Journal::ReopenAfterNoSpace(uint64_t last_acknowledged) {
  const std::string context = absl::StrCat("journal ", dir_);
  // RocksDB cannot resume after a failed WAL write in place (DB::Resume fails to switch away
  // from the failed WAL: "Seen error"). Reopening it can: it replays the WAL, drops what the
  // failed write left (an incomplete last record; OpenDb checks that nothing acknowledged is
  // affected), moves everything into a table file and starts a new WAL. Reopening needs room for
  // that table file, so it is not tried (and RocksDB stays open for reads) while the free space
  // is smaller than the WALs plus 1 MiB.
  const std::map<uint64_t, uint64_t> wals_before = ListWals(dir_);
  uint64_t needed = 1 << 20;
  for (const auto& [number, size] : wals_before) needed += size;
  uint64_t free_space = 0;
  rocksdb::Env* env = env_ != nullptr ? env_.get() : rocksdb::Env::Default();
  if (env->GetFreeSpace(dir_, &free_space).ok() && free_space < needed) {
    return absl::UnavailableError(absl::StrCat(context, ": out of disk space: ", free_space,
                                               " bytes free, resuming needs ", needed,
                                               " (retry once space is freed)"));
  }
  const HighWater mark{last_acknowledged, wal_number_};
  absl::WriterMutexLock lock(&db_mu_);
  if (db_ != nullptr) {
    db_->Close().PermitUncheckedError();
    db_.reset();
  }
  high_water_file_.reset();
  ASSIGN_OR_RETURN(db_, OpenDb(dir_, env_.get(), mark, wals_before));
  RETURN_IF_ERROR(LoadState(mark, wals_before));
  const uint64_t found = last_sequence();
  if (found != last_acknowledged) {
    return absl::FailedPreconditionError(absl::StrCat(
        context, ": records ", last_acknowledged + 1, "..", found,
        " were reported failed (full disk) but are in the journal after all: restart and "
        "recover"));
  }
  LOG(INFO) << context << ": writing again after a full disk, from record "
            << last_acknowledged + 1;
  return absl::OkStatus();
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
