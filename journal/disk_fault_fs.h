// DiskFaultFileSystem: a rocksdb::FileSystem whose file operations suffer the faults a
// DiskFaultControl names now (EIO, stalls), for the chaos harness's failing and slow disks under
// a dispatcher's journal (issue 33). It goes in through JournalOptions::file_system. Which
// operation is a read, a write or a sync is as in common/disk_fault_control.h, here: reads of
// sequential and random-access files (and opening them), listing a directory, a file's size;
// appends, truncation, close, renames, deletions and directory creation; Sync, Fsync and
// RangeSync of files and Fsync of directories. An injected EIO is an IOError. The journal's
// high-water file is written with plain POSIX calls (journal/high_water_file.h), past this file
// system: it suffers no injected fault. Thread-safe.
#ifndef GRANARY_JOURNAL_DISK_FAULT_FS_H_
#define GRANARY_JOURNAL_DISK_FAULT_FS_H_

#include <memory>
#include <string>
#include <vector>

#include "common/disk_fault_control.h"
#include "rocksdb/file_system.h"

namespace granary {

class DiskFaultFileSystem : public rocksdb::FileSystemWrapper {
 public:
  // `control` must outlive this file system and every file it opens (RocksDB may keep them).
  DiskFaultFileSystem(std::shared_ptr<rocksdb::FileSystem> base, DiskFaultControl* control)
      : FileSystemWrapper(std::move(base)), control_(control) {}

  const char* Name() const override { return "GranaryDiskFaultFileSystem"; }

  rocksdb::IOStatus NewSequentialFile(const std::string& fname, const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSSequentialFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomAccessFile(const std::string& fname,
                                        const rocksdb::FileOptions& options,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
                                        rocksdb::IODebugContext* dbg) override;
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
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& io_opts,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus GetChildren(const std::string& dir, const rocksdb::IOOptions& options,
                                std::vector<std::string>* result,
                                rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus GetFileSize(const std::string& fname, const rocksdb::IOOptions& options,
                                uint64_t* file_size, rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& target,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& fname, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& dirname,
                                       const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) override;

 private:
  DiskFaultControl* const control_;
};

}  // namespace granary

#endif  // GRANARY_JOURNAL_DISK_FAULT_FS_H_
