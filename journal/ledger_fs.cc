#include "journal/ledger_fs.h"

#include <utility>

namespace granary {
namespace {

rocksdb::IOStatus ToIOStatus(const absl::Status& status) {
  if (status.ok()) return rocksdb::IOStatus::OK();
  return rocksdb::IOStatus::IOError(std::string(status.message()));
}

// A writable file whose successful syncs are recorded with the length the file had.
class LedgerWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  LedgerWritableFile(std::unique_ptr<rocksdb::FSWritableFile> file, std::string path,
                     SyncLedger* ledger)
      : FSWritableFileOwnerWrapper(std::move(file)), path_(std::move(path)), ledger_(ledger) {}

  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
    const uint64_t length = target()->GetFileSize(options, dbg);
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::Sync(options, dbg);
    return s.ok() ? ToIOStatus(ledger_->Synced(path_, length)) : s;
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    const uint64_t length = target()->GetFileSize(options, dbg);
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::Fsync(options, dbg);
    return s.ok() ? ToIOStatus(ledger_->Synced(path_, length)) : s;
  }

 private:
  const std::string path_;
  SyncLedger* const ledger_;
};

// A directory whose successful fsyncs are recorded.
class LedgerDirectory : public rocksdb::FSDirectoryWrapper {
 public:
  LedgerDirectory(std::unique_ptr<rocksdb::FSDirectory> dir, std::string path, SyncLedger* ledger)
      : FSDirectoryWrapper(std::move(dir)), path_(std::move(path)), ledger_(ledger) {}

  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = FSDirectoryWrapper::Fsync(options, dbg);
    return s.ok() ? ToIOStatus(ledger_->DirSynced(path_)) : s;
  }
  rocksdb::IOStatus FsyncWithDirOptions(
      const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg,
      const rocksdb::DirFsyncOptions& dir_fsync_options) override {
    rocksdb::IOStatus s = FSDirectoryWrapper::FsyncWithDirOptions(options, dbg, dir_fsync_options);
    return s.ok() ? ToIOStatus(ledger_->DirSynced(path_)) : s;
  }

 private:
  const std::string path_;
  SyncLedger* const ledger_;
};

// Wraps `*result` if `status` is OK.
rocksdb::IOStatus WrapFile(const std::string& fname, rocksdb::IOStatus status, SyncLedger* ledger,
                           std::unique_ptr<rocksdb::FSWritableFile>* result) {
  if (status.ok())
    *result = std::make_unique<LedgerWritableFile>(std::move(*result), fname, ledger);
  return status;
}

}  // namespace

rocksdb::IOStatus LedgerFileSystem::NewWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  // Recorded before the file exists, so that whatever is written to it is covered.
  const bool existed = target()->FileExists(fname, options.io_options, dbg).ok();
  rocksdb::IOStatus recorded =
      ToIOStatus(existed ? ledger_->Truncated(fname) : ledger_->Created(fname));
  if (!recorded.ok()) return recorded;
  return WrapFile(fname, target()->NewWritableFile(fname, options, result, dbg), ledger_, result);
}

rocksdb::IOStatus LedgerFileSystem::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return WrapFile(fname, target()->ReopenWritableFile(fname, options, result, dbg), ledger_,
                  result);
}

rocksdb::IOStatus LedgerFileSystem::ReuseWritableFile(
    const std::string& fname, const std::string& old_fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = target()->ReuseWritableFile(fname, old_fname, options, result, dbg);
  if (!s.ok()) return s;
  s = ToIOStatus(ledger_->Renamed(old_fname, fname));
  if (s.ok()) s = ToIOStatus(ledger_->Truncated(fname));
  return WrapFile(fname, s, ledger_, result);
}

rocksdb::IOStatus LedgerFileSystem::NewDirectory(const std::string& name,
                                                 const rocksdb::IOOptions& options,
                                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                                 rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = target()->NewDirectory(name, options, result, dbg);
  if (s.ok()) *result = std::make_unique<LedgerDirectory>(std::move(*result), name, ledger_);
  return s;
}

rocksdb::IOStatus LedgerFileSystem::RenameFile(const std::string& src, const std::string& target,
                                               const rocksdb::IOOptions& options,
                                               rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = FileSystemWrapper::RenameFile(src, target, options, dbg);
  return s.ok() ? ToIOStatus(ledger_->Renamed(src, target)) : s;
}

rocksdb::IOStatus LedgerFileSystem::DeleteFile(const std::string& fname,
                                               const rocksdb::IOOptions& options,
                                               rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = FileSystemWrapper::DeleteFile(fname, options, dbg);
  return s.ok() ? ToIOStatus(ledger_->Deleted(fname)) : s;
}

}  // namespace granary
