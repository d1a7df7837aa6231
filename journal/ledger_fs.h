// LedgerFileSystem: a rocksdb::FileSystem that records the durability events of RocksDB's writes
// in a sync ledger (common/sync_ledger.h), so that a harness can make the journal's process lose
// power after killing it. The journal wraps its file system in one when
// JournalOptions::sync_ledger is set.
//
// Recorded: a writable file's creation or truncation (NewWritableFile; before the file is
// opened), its Sync/Fsync (the length it had when the sync began, after the sync returned OK —
// RangeSync is not a durability point), a reused file (ReuseWritableFile: a rename, then a
// truncation — RocksDB reuses WAL files only with recycle_log_file_num > 0, which it turns off
// under the journal's WAL recovery modes), RenameFile, DeleteFile, and a directory's
// Fsync/FsyncWithDirOptions (NewDirectory). A file reopened for appending (ReopenWritableFile)
// records nothing until it is synced. A failure to append to the ledger fails the call it
// records.
//
// Thread-safe.
#ifndef GRANARY_JOURNAL_LEDGER_FS_H_
#define GRANARY_JOURNAL_LEDGER_FS_H_

#include <memory>
#include <string>

#include "common/sync_ledger.h"
#include "rocksdb/file_system.h"

namespace granary {

class LedgerFileSystem : public rocksdb::FileSystemWrapper {
 public:
  // `ledger` must outlive this file system and every file it opened.
  LedgerFileSystem(std::shared_ptr<rocksdb::FileSystem> base, SyncLedger* ledger)
      : FileSystemWrapper(std::move(base)), ledger_(ledger) {}

  const char* Name() const override { return "GranaryLedgerFileSystem"; }

  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& fname,
                                       const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& target,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& fname, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;

 private:
  SyncLedger* const ledger_;
};

}  // namespace granary

#endif  // GRANARY_JOURNAL_LEDGER_FS_H_
