#include "common/disk_fault_env.h"

#include <utility>

#include "common/status_macros.h"

namespace granary {
namespace {

class DiskFaultSequentialFile : public SequentialFile {
 public:
  DiskFaultSequentialFile(std::unique_ptr<SequentialFile> file, DiskFaultControl* control)
      : file_(std::move(file)), control_(control) {}

  absl::StatusOr<size_t> Read(size_t n, char* scratch) override {
    RETURN_IF_ERROR(control_->Before(DiskOp::kRead, path()));
    return file_->Read(n, scratch);
  }
  absl::Status Skip(uint64_t n) override {
    RETURN_IF_ERROR(control_->Before(DiskOp::kRead, path()));
    return file_->Skip(n);
  }
  const std::string& path() const override { return file_->path(); }

 private:
  const std::unique_ptr<SequentialFile> file_;
  DiskFaultControl* const control_;
};

class DiskFaultWritableFile : public WritableFile {
 public:
  DiskFaultWritableFile(std::unique_ptr<WritableFile> file, DiskFaultControl* control)
      : file_(std::move(file)), control_(control) {}

  absl::Status Append(absl::string_view data) override {
    RETURN_IF_ERROR(control_->Before(DiskOp::kWrite, path()));
    return file_->Append(data);
  }
  absl::Status Flush() override {
    RETURN_IF_ERROR(control_->Before(DiskOp::kWrite, path()));
    return file_->Flush();
  }
  absl::Status Sync() override {
    RETURN_IF_ERROR(control_->Before(DiskOp::kSync, path()));
    return file_->Sync();
  }
  absl::Status Close() override {
    RETURN_IF_ERROR(control_->Before(DiskOp::kWrite, path()));
    return file_->Close();
  }
  const std::string& path() const override { return file_->path(); }

 private:
  const std::unique_ptr<WritableFile> file_;
  DiskFaultControl* const control_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SequentialFile>> DiskFaultEnv::NewSequentialFile(
    const std::string& path) {
  RETURN_IF_ERROR(control_->Before(DiskOp::kRead, path));
  ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, EnvWrapper::NewSequentialFile(path));
  return std::make_unique<DiskFaultSequentialFile>(std::move(file), control_);
}

absl::StatusOr<std::unique_ptr<WritableFile>> DiskFaultEnv::NewWritableFile(
    const std::string& path) {
  RETURN_IF_ERROR(control_->Before(DiskOp::kWrite, path));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, EnvWrapper::NewWritableFile(path));
  return std::make_unique<DiskFaultWritableFile>(std::move(file), control_);
}

absl::StatusOr<uint64_t> DiskFaultEnv::GetFileSize(const std::string& path) {
  RETURN_IF_ERROR(control_->Before(DiskOp::kRead, path));
  return EnvWrapper::GetFileSize(path);
}

absl::StatusOr<std::vector<std::string>> DiskFaultEnv::Glob(const std::string& pattern) {
  RETURN_IF_ERROR(control_->Before(DiskOp::kRead, pattern));
  return EnvWrapper::Glob(pattern);
}

absl::StatusOr<std::vector<std::string>> DiskFaultEnv::GetChildren(const std::string& dir) {
  RETURN_IF_ERROR(control_->Before(DiskOp::kRead, dir));
  return EnvWrapper::GetChildren(dir);
}

absl::Status DiskFaultEnv::RenameFile(const std::string& from, const std::string& to) {
  RETURN_IF_ERROR(control_->Before(DiskOp::kWrite, from));
  RETURN_IF_ERROR(control_->Before(DiskOp::kWrite, to));
  return EnvWrapper::RenameFile(from, to);
}

absl::Status DiskFaultEnv::DeleteFile(const std::string& path) {
  RETURN_IF_ERROR(control_->Before(DiskOp::kWrite, path));
  return EnvWrapper::DeleteFile(path);
}

absl::Status DiskFaultEnv::CreateDirs(const std::string& dir) {
  RETURN_IF_ERROR(control_->Before(DiskOp::kWrite, dir));
  return EnvWrapper::CreateDirs(dir);
}

absl::Status DiskFaultEnv::DeleteDir(const std::string& dir) {
  RETURN_IF_ERROR(control_->Before(DiskOp::kWrite, dir));
  return EnvWrapper::DeleteDir(dir);
}

absl::Status DiskFaultEnv::SyncDir(const std::string& dir) {
  RETURN_IF_ERROR(control_->Before(DiskOp::kSync, dir));
  return EnvWrapper::SyncDir(dir);
}

}  // namespace granary
