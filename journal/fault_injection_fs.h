// FaultInjectionFileSystem: a rocksdb::FileSystem for tests that can make WAL syncs fail.
//
// Pass one to Journal::Open through JournalOptions::file_system, then call
// set_fail_wal_syncs(true): every later Sync/Fsync/RangeSync of a RocksDB WAL file (*.log)
// returns an IOError ("injected WAL sync failure") after the bytes were already handed to the
// underlying file, exactly like a real fsync failure. All other I/O passes through unchanged.
//
// Thread-safe.
#ifndef GRANARY_JOURNAL_FAULT_INJECTION_FS_H_
#define GRANARY_JOURNAL_FAULT_INJECTION_FS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "rocksdb/file_system.h"

namespace granary {

class FaultInjectionFileSystem : public rocksdb::FileSystemWrapper {
 public:
  // Wraps `base` (default: RocksDB's POSIX file system).
  explicit FaultInjectionFileSystem(
      std::shared_ptr<rocksdb::FileSystem> base = rocksdb::FileSystem::Default());

  const char* Name() const override { return "GranaryFaultInjectionFileSystem"; }

  void set_fail_wal_syncs(bool fail) { state_->fail_wal_syncs.store(fail); }
  // With true, the injected sync failures are "No space left on device" (IOError, subcode
  // kNoSpace), as a file system that allocates at writeback reports a full disk at fsync.
  void set_wal_sync_failures_are_no_space(bool no_space) { state_->no_space.store(no_space); }
  // How many WAL syncs were failed so far.
  int64_t wal_syncs_failed() const { return state_->wal_syncs_failed.load(); }

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

  // Shared with the files it opened, which may outlive this object inside RocksDB.
  struct State {
    std::atomic<bool> fail_wal_syncs{false};
    std::atomic<int64_t> wal_syncs_failed{0};
    std::atomic<bool> no_space{false};
  };

 private:
  // Wraps `*result` if `fname` is a WAL file and `status` is OK.
  rocksdb::IOStatus MaybeWrap(const std::string& fname, rocksdb::IOStatus status,
                              std::unique_ptr<rocksdb::FSWritableFile>* result);

  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace granary

#endif  // GRANARY_JOURNAL_FAULT_INJECTION_FS_H_
