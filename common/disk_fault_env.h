// DiskFaultEnv: an Env whose file operations suffer the faults a DiskFaultControl names now
// (EIO, stalls; common/disk_fault_control.h says which operation is a read, a write or a sync),
// for the chaos harness's failing and slow disks under a worker's checkpoints and cache or a
// dispatcher's cache (issue 33). Everything else (the clock, FileExists) passes to the base Env.
// Thread-safe if the base Env is.
#ifndef GRANARY_COMMON_DISK_FAULT_ENV_H_
#define GRANARY_COMMON_DISK_FAULT_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "common/disk_fault_control.h"
#include "common/env_wrapper.h"

namespace granary {

class DiskFaultEnv : public EnvWrapper {
 public:
  // `base` and `control` must outlive this Env and the files it opens.
  DiskFaultEnv(Env* base, DiskFaultControl* control) : EnvWrapper(base), control_(control) {}

  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> Glob(const std::string& pattern) override;
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status CreateDirs(const std::string& dir) override;
  absl::Status DeleteDir(const std::string& dir) override;
  absl::Status SyncDir(const std::string& dir) override;

 private:
  DiskFaultControl* const control_;
};

}  // namespace granary

#endif  // GRANARY_COMMON_DISK_FAULT_ENV_H_
