#include "common/ledger_env.h"

#include <utility>

#include "common/status_macros.h"

namespace granary {

absl::StatusOr<std::unique_ptr<WritableFile>> LedgerEnv::NewWritableFile(const std::string& path) {
  // Recorded before the file exists, so that whatever is written to it is covered.
  RETURN_IF_ERROR(base()->FileExists(path) ? ledger_->Truncated(path) : ledger_->Created(path));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, base()->NewWritableFile(path));
  return std::make_unique<SyncWatchingFile>(
      std::move(file), [ledger = ledger_](WritableFile* base, uint64_t appended) {
        RETURN_IF_ERROR(base->Sync());
        return ledger->Synced(base->path(), appended);
      });
}

absl::Status LedgerEnv::RenameFile(const std::string& from, const std::string& to) {
  RETURN_IF_ERROR(base()->RenameFile(from, to));
  return ledger_->Renamed(from, to);
}

absl::Status LedgerEnv::DeleteFile(const std::string& path) {
  RETURN_IF_ERROR(base()->DeleteFile(path));
  return ledger_->Deleted(path);
}

absl::Status LedgerEnv::SyncDir(const std::string& dir) {
  RETURN_IF_ERROR(base()->SyncDir(dir));
  return ledger_->DirSynced(dir);
}

absl::StatusOr<std::unique_ptr<ServerFileEnv>> ServerFileEnv::FromEnvironment(Env* base) {
  std::unique_ptr<ServerFileEnv> files(new ServerFileEnv());
  files->base_ = base;
  ASSIGN_OR_RETURN(files->ledger_, SyncLedger::OpenFromEnvironment());
  if (files->ledger_ != nullptr) {
    files->ledger_env_ = std::make_unique<LedgerEnv>(base, files->ledger_.get());
  }
  return files;
}

}  // namespace granary
