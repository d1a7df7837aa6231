#include "common/ledger_env.h"

#include <utility>

#include "common/status_macros.h"

namespace granary {

class LedgerEnv::File : public WritableFile {
 public:
  File(SyncLedger* ledger, std::unique_ptr<WritableFile> base)
      : ledger_(ledger), base_(std::move(base)) {}

  absl::Status Append(absl::string_view data) override {
    RETURN_IF_ERROR(base_->Append(data));
    appended_ += data.size();
    return absl::OkStatus();
  }
  absl::Status Flush() override { return base_->Flush(); }
  absl::Status Sync() override {
    const uint64_t length = appended_;
    RETURN_IF_ERROR(base_->Sync());
    return ledger_->Synced(base_->path(), length);
  }
  absl::Status Close() override { return base_->Close(); }
  const std::string& path() const override { return base_->path(); }

 private:
  SyncLedger* const ledger_;
  const std::unique_ptr<WritableFile> base_;
  uint64_t appended_ = 0;
};

absl::StatusOr<std::unique_ptr<WritableFile>> LedgerEnv::NewWritableFile(const std::string& path) {
  // Recorded before the file exists, so that whatever is written to it is covered.
  RETURN_IF_ERROR(base()->FileExists(path) ? ledger_->Truncated(path) : ledger_->Created(path));
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, base()->NewWritableFile(path));
  return std::make_unique<File>(ledger_, std::move(file));
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

absl::StatusOr<std::unique_ptr<ServerFileEnv>> ServerFileEnv::FromEnvironment() {
  std::unique_ptr<ServerFileEnv> files(new ServerFileEnv());
  ASSIGN_OR_RETURN(files->ledger_, SyncLedger::OpenFromEnvironment());
  if (files->ledger_ != nullptr) {
    files->ledger_env_ = std::make_unique<LedgerEnv>(Env::Default(), files->ledger_.get());
  }
  return files;
}

}  // namespace granary
