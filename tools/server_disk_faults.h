// ServerDiskFaults: the disk faults a dispatcher or worker process injects into its own files
// while the environment variable GRANARY_DISK_FAULTS names a control file
// (common/disk_fault_control.h) — how the chaos harness makes disks fail or stall under real
// processes (issue 33). Unset, it changes nothing.
#ifndef GRANARY_TOOLS_SERVER_DISK_FAULTS_H_
#define GRANARY_TOOLS_SERVER_DISK_FAULTS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/disk_fault_control.h"
#include "common/disk_fault_env.h"
#include "common/env.h"
#include "rocksdb/file_system.h"

namespace granary {

class ServerDiskFaults {
 public:
  // The control file's parse error (naming it and the line) if it cannot be parsed now. The
  // DiskFaultEnv wraps `base`, which must outlive this object.
  static absl::StatusOr<std::unique_ptr<ServerDiskFaults>> FromEnvironment(
      Env* base = Env::Default());

  // The Env of the process's files (checkpoints, cache): `base`, behind a DiskFaultEnv while
  // injecting. Lives as long as this object.
  Env* env() { return env_ != nullptr ? env_.get() : base_; }
  // The journal's file system (DispatcherOptions::journal_file_system): a DiskFaultFileSystem
  // while injecting, else nullptr (the default one).
  std::shared_ptr<rocksdb::FileSystem> journal_file_system() const { return journal_fs_; }

 private:
  ServerDiskFaults() = default;

  Env* base_ = nullptr;
  std::unique_ptr<DiskFaultControl> control_;
  std::unique_ptr<DiskFaultEnv> env_;
  std::shared_ptr<rocksdb::FileSystem> journal_fs_;
};

}  // namespace granary

#endif  // GRANARY_TOOLS_SERVER_DISK_FAULTS_H_
