#include "journal/disk_fault_fs.h"

#include <utility>

namespace granary {
namespace {

// The fault `control` injects before `op` on `path`, as RocksDB reports an I/O error.
rocksdb::IOStatus Before(DiskFaultControl* control, DiskOp op, const std::string& path) {
  const absl::Status status = control->Before(op, path);
  if (status.ok()) return rocksdb::IOStatus::OK();
  return rocksdb::IOStatus::IOError(std::string(status.message()));
}

class DiskFaultSequentialFile : public rocksdb::FSSequentialFileOwnerWrapper {
 public:
  DiskFaultSequentialFile(std::unique_ptr<rocksdb::FSSequentialFile> file, std::string path,
                          DiskFaultControl* control)
      : FSSequentialFileOwnerWrapper(std::move(file)), path_(std::move(path)), control_(control) {}

  rocksdb::IOStatus Read(size_t n, const rocksdb::IOOptions& options, rocksdb::Slice* result,
                         char* scratch, rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kRead, path_);
    return s.ok() ? FSSequentialFileOwnerWrapper::Read(n, options, result, scratch, dbg) : s;
  }
  rocksdb::IOStatus PositionedRead(uint64_t offset, size_t n, const rocksdb::IOOptions& options,
                                   rocksdb::Slice* result, char* scratch,
                                   rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kRead, path_);
    return s.ok() ? FSSequentialFileOwnerWrapper::PositionedRead(offset, n, options, result,
                                                                 scratch, dbg)
                  : s;
  }
  rocksdb::IOStatus Skip(uint64_t n) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kRead, path_);
    return s.ok() ? FSSequentialFileOwnerWrapper::Skip(n) : s;
  }

 private:
  const std::string path_;
  DiskFaultControl* const control_;
};

class DiskFaultRandomAccessFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  DiskFaultRandomAccessFile(std::unique_ptr<rocksdb::FSRandomAccessFile> file, std::string path,
                            DiskFaultControl* control)
      : FSRandomAccessFileOwnerWrapper(std::move(file)),
        path_(std::move(path)),
        control_(control) {}

  rocksdb::IOStatus Read(uint64_t offset, size_t n, const rocksdb::IOOptions& options,
                         rocksdb::Slice* result, char* scratch,
                         rocksdb::IODebugContext* dbg) const override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kRead, path_);
    return s.ok() ? FSRandomAccessFileOwnerWrapper::Read(offset, n, options, result, scratch, dbg)
                  : s;
  }
  rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t num_reqs,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kRead, path_);
    return s.ok() ? FSRandomAccessFileOwnerWrapper::MultiRead(reqs, num_reqs, options, dbg) : s;
  }

 private:
  const std::string path_;
  DiskFaultControl* const control_;
};

class DiskFaultWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  DiskFaultWritableFile(std::unique_ptr<rocksdb::FSWritableFile> file, std::string path,
                        DiskFaultControl* control)
      : FSWritableFileOwnerWrapper(std::move(file)), path_(std::move(path)), control_(control) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kWrite, path_);
    return s.ok() ? FSWritableFileOwnerWrapper::Append(data, options, dbg) : s;
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kWrite, path_);
    return s.ok() ? FSWritableFileOwnerWrapper::Append(data, options, info, dbg) : s;
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kWrite, path_);
    return s.ok() ? FSWritableFileOwnerWrapper::PositionedAppend(data, offset, options, dbg) : s;
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     const rocksdb::DataVerificationInfo& info,
                                     rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kWrite, path_);
    return s.ok() ? FSWritableFileOwnerWrapper::PositionedAppend(data, offset, options, info, dbg)
                  : s;
  }
  rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kWrite, path_);
    return s.ok() ? FSWritableFileOwnerWrapper::Truncate(size, options, dbg) : s;
  }
  rocksdb::IOStatus Close(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kWrite, path_);
    return s.ok() ? FSWritableFileOwnerWrapper::Close(options, dbg) : s;
  }
  rocksdb::IOStatus Flush(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kWrite, path_);
    return s.ok() ? FSWritableFileOwnerWrapper::Flush(options, dbg) : s;
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kSync, path_);
    return s.ok() ? FSWritableFileOwnerWrapper::Sync(options, dbg) : s;
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kSync, path_);
    return s.ok() ? FSWritableFileOwnerWrapper::Fsync(options, dbg) : s;
  }
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kSync, path_);
    return s.ok() ? FSWritableFileOwnerWrapper::RangeSync(offset, nbytes, options, dbg) : s;
  }

 private:
  const std::string path_;
  DiskFaultControl* const control_;
};

class DiskFaultDirectory : public rocksdb::FSDirectoryWrapper {
 public:
  DiskFaultDirectory(std::unique_ptr<rocksdb::FSDirectory> dir, std::string path,
                     DiskFaultControl* control)
      : FSDirectoryWrapper(std::move(dir)), path_(std::move(path)), control_(control) {}

  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kSync, path_);
    return s.ok() ? FSDirectoryWrapper::Fsync(options, dbg) : s;
  }
  rocksdb::IOStatus FsyncWithDirOptions(
      const rocksdb::IOOptions& options, rocksdb::IODebugContext* dbg,
      const rocksdb::DirFsyncOptions& dir_fsync_options) override {
    rocksdb::IOStatus s = Before(control_, DiskOp::kSync, path_);
    return s.ok() ? FSDirectoryWrapper::FsyncWithDirOptions(options, dbg, dir_fsync_options) : s;
  }

 private:
  const std::string path_;
  DiskFaultControl* const control_;
};

// Opens a file with `open` after the fault check for `op`, and wraps it in `Wrapped`.
template <typename Wrapped, typename File, typename Open>
rocksdb::IOStatus OpenWrapped(DiskFaultControl* control, DiskOp op, const std::string& path,
                              std::unique_ptr<File>* result, Open open) {
  rocksdb::IOStatus s = Before(control, op, path);
  if (s.ok()) s = open();
  if (s.ok()) *result = std::make_unique<Wrapped>(std::move(*result), path, control);
  return s;
}

}  // namespace

rocksdb::IOStatus DiskFaultFileSystem::NewSequentialFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSSequentialFile>* result, rocksdb::IODebugContext* dbg) {
  return OpenWrapped<DiskFaultSequentialFile>(control_, DiskOp::kRead, fname, result, [&] {
    return target()->NewSequentialFile(fname, options, result, dbg);
  });
}

rocksdb::IOStatus DiskFaultFileSystem::NewRandomAccessFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSRandomAccessFile>* result, rocksdb::IODebugContext* dbg) {
  return OpenWrapped<DiskFaultRandomAccessFile>(control_, DiskOp::kRead, fname, result, [&] {
    return target()->NewRandomAccessFile(fname, options, result, dbg);
  });
}

rocksdb::IOStatus DiskFaultFileSystem::NewWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return OpenWrapped<DiskFaultWritableFile>(control_, DiskOp::kWrite, fname, result, [&] {
    return target()->NewWritableFile(fname, options, result, dbg);
  });
}

rocksdb::IOStatus DiskFaultFileSystem::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return OpenWrapped<DiskFaultWritableFile>(control_, DiskOp::kWrite, fname, result, [&] {
    return target()->ReopenWritableFile(fname, options, result, dbg);
  });
}

rocksdb::IOStatus DiskFaultFileSystem::ReuseWritableFile(
    const std::string& fname, const std::string& old_fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, rocksdb::IODebugContext* dbg) {
  return OpenWrapped<DiskFaultWritableFile>(control_, DiskOp::kWrite, fname, result, [&] {
    return target()->ReuseWritableFile(fname, old_fname, options, result, dbg);
  });
}

rocksdb::IOStatus DiskFaultFileSystem::NewDirectory(const std::string& name,
                                                    const rocksdb::IOOptions& io_opts,
                                                    std::unique_ptr<rocksdb::FSDirectory>* result,
                                                    rocksdb::IODebugContext* dbg) {
  // Opening a directory is neither a read nor a write; its Fsync is a sync.
  rocksdb::IOStatus s = target()->NewDirectory(name, io_opts, result, dbg);
  if (s.ok()) *result = std::make_unique<DiskFaultDirectory>(std::move(*result), name, control_);
  return s;
}

rocksdb::IOStatus DiskFaultFileSystem::GetChildren(const std::string& dir,
                                                   const rocksdb::IOOptions& options,
                                                   std::vector<std::string>* result,
                                                   rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = Before(control_, DiskOp::kRead, dir);
  return s.ok() ? target()->GetChildren(dir, options, result, dbg) : s;
}

rocksdb::IOStatus DiskFaultFileSystem::GetFileSize(const std::string& fname,
                                                   const rocksdb::IOOptions& options,
                                                   uint64_t* file_size,
                                                   rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = Before(control_, DiskOp::kRead, fname);
  return s.ok() ? target()->GetFileSize(fname, options, file_size, dbg) : s;
}

rocksdb::IOStatus DiskFaultFileSystem::RenameFile(const std::string& src, const std::string& target,
                                                  const rocksdb::IOOptions& options,
                                                  rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = Before(control_, DiskOp::kWrite, src);
  if (s.ok()) s = Before(control_, DiskOp::kWrite, target);
  return s.ok() ? this->target()->RenameFile(src, target, options, dbg) : s;
}

rocksdb::IOStatus DiskFaultFileSystem::DeleteFile(const std::string& fname,
                                                  const rocksdb::IOOptions& options,
                                                  rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = Before(control_, DiskOp::kWrite, fname);
  return s.ok() ? target()->DeleteFile(fname, options, dbg) : s;
}

rocksdb::IOStatus DiskFaultFileSystem::CreateDirIfMissing(const std::string& dirname,
                                                          const rocksdb::IOOptions& options,
                                                          rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = Before(control_, DiskOp::kWrite, dirname);
  return s.ok() ? target()->CreateDirIfMissing(dirname, options, dbg) : s;
}

}  // namespace granary
