#include "tools/server_disk_faults.h"

#include "common/status_macros.h"
#include "glog/logging.h"
#include "journal/disk_fault_fs.h"

namespace granary {

absl::StatusOr<std::unique_ptr<ServerDiskFaults>> ServerDiskFaults::FromEnvironment(Env* base) {
  std::unique_ptr<ServerDiskFaults> faults(new ServerDiskFaults());
  faults->base_ = base;
  ASSIGN_OR_RETURN(faults->control_, DiskFaultControl::FromEnvironment());
  if (faults->control_ != nullptr) {
    LOG(WARNING) << "injecting the disk faults " << faults->control_->control_file() << " names ("
                 << kDiskFaultsEnvironmentVariable << ")";
    faults->env_ = std::make_unique<DiskFaultEnv>(base, faults->control_.get());
    faults->journal_fs_ = std::make_shared<DiskFaultFileSystem>(rocksdb::FileSystem::Default(),
                                                                faults->control_.get());
  }
  return faults;
}

}  // namespace granary
