#include "common/fault_injection_env.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {

void FaultInjectionEnv::FailNextSyncs(int n) {
  absl::MutexLock lock(&mu_);
  fail_syncs_ = n;
}

int64_t FaultInjectionEnv::successful_syncs() const {
  absl::MutexLock lock(&mu_);
  return successful_syncs_;
}

absl::StatusOr<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewWritableFile(
    const std::string& path) {
  const bool existed = base()->FileExists(path);
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, base()->NewWritableFile(path));
  absl::MutexLock lock(&mu_);
  if (existed) {
    model_.Truncated(path);
  } else {
    model_.Created(path);
  }
  return std::make_unique<SyncWatchingFile>(
      std::move(file),
      [this](WritableFile* base, uint64_t appended) { return SyncFile(base, appended); });
}

absl::Status FaultInjectionEnv::SyncFile(WritableFile* base_file, uint64_t appended) {
  {
    absl::MutexLock lock(&mu_);
    if (fail_syncs_ > 0) {
      --fail_syncs_;
      return absl::InternalError(
          absl::StrCat("fsync ", base_file->path(), ": injected failure (FaultInjectionEnv)"));
    }
  }
  RETURN_IF_ERROR(base_file->Sync());
  absl::MutexLock lock(&mu_);
  model_.Synced(base_file->path(), appended);
  ++successful_syncs_;
  return absl::OkStatus();
}

absl::Status FaultInjectionEnv::RenameFile(const std::string& from, const std::string& to) {
  RETURN_IF_ERROR(base()->RenameFile(from, to));
  absl::MutexLock lock(&mu_);
  model_.Renamed(from, to);
  return absl::OkStatus();
}

absl::Status FaultInjectionEnv::DeleteFile(const std::string& path) {
  RETURN_IF_ERROR(base()->DeleteFile(path));
  absl::MutexLock lock(&mu_);
  model_.Deleted(path);
  return absl::OkStatus();
}

absl::Status FaultInjectionEnv::SyncDir(const std::string& dir) {
  RETURN_IF_ERROR(base()->SyncDir(dir));
  absl::MutexLock lock(&mu_);
  model_.DirSynced(dir);
  return absl::OkStatus();
}

absl::StatusOr<PowerLossReport> FaultInjectionEnv::DropUnsyncedData(
    std::optional<uint64_t> torn_seed) {
  absl::MutexLock lock(&mu_);
  return model_.Apply(base(), torn_seed);
}

}  // namespace granary
