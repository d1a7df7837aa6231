#include "common/fault_injection_env.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace granary {
namespace {

// "a/b/c" -> "a/b"; "c" -> ".".
std::string ParentDir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string StripTrailingSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

void KeepFirstError(absl::Status* first, const absl::Status& status) {
  if (first->ok() && !status.ok()) *first = status;
}

}  // namespace

class FaultInjectionEnv::File : public WritableFile {
 public:
  File(FaultInjectionEnv* env, std::unique_ptr<WritableFile> base, std::shared_ptr<FileState> state)
      : env_(env), base_(std::move(base)), state_(std::move(state)) {}

  absl::Status Append(absl::string_view data) override {
    RETURN_IF_ERROR(base_->Append(data));
    env_->Appended(state_.get(), data.size());
    return absl::OkStatus();
  }
  absl::Status Flush() override { return base_->Flush(); }
  absl::Status Sync() override { return env_->SyncFile(base_.get(), state_.get()); }
  absl::Status Close() override { return base_->Close(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectionEnv* const env_;
  const std::unique_ptr<WritableFile> base_;
  const std::shared_ptr<FileState> state_;
};

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
  auto state = std::make_shared<FileState>();
  absl::MutexLock lock(&mu_);
  files_[path] = state;
  if (!existed) pending_.push_back({DirOp::kCreate, ParentDir(path), path, ""});
  return std::make_unique<File>(this, std::move(file), std::move(state));
}

void FaultInjectionEnv::Appended(FileState* state, uint64_t n) {
  absl::MutexLock lock(&mu_);
  state->appended += n;
}

absl::Status FaultInjectionEnv::SyncFile(WritableFile* base_file, FileState* state) {
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
  state->synced = state->appended;
  ++successful_syncs_;
  return absl::OkStatus();
}

absl::Status FaultInjectionEnv::RenameFile(const std::string& from, const std::string& to) {
  RETURN_IF_ERROR(base()->RenameFile(from, to));
  absl::MutexLock lock(&mu_);
  auto it = files_.find(from);
  if (it != files_.end()) {
    files_[to] = it->second;
    files_.erase(from);
  } else {
    files_.erase(to);  // an untracked file now lives at `to`
  }
  pending_.push_back({DirOp::kRename, ParentDir(to), to, from});
  return absl::OkStatus();
}

absl::Status FaultInjectionEnv::DeleteFile(const std::string& path) {
  RETURN_IF_ERROR(base()->DeleteFile(path));
  absl::MutexLock lock(&mu_);
  files_.erase(path);
  return absl::OkStatus();
}

absl::Status FaultInjectionEnv::SyncDir(const std::string& dir) {
  RETURN_IF_ERROR(base()->SyncDir(dir));
  const std::string synced = StripTrailingSlashes(dir);
  absl::MutexLock lock(&mu_);
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [&](const DirOp& op) { return op.dir == synced; }),
                 pending_.end());
  return absl::OkStatus();
}

absl::Status FaultInjectionEnv::DropUnsyncedData() {
  absl::MutexLock lock(&mu_);
  absl::Status first;
  // File contents first, at the files' current paths.
  for (const auto& [path, state] : files_) {
    if (state->synced >= state->appended || !base()->FileExists(path)) continue;
    absl::StatusOr<std::string> data = ReadFileToString(base(), path);
    if (!data.ok()) {
      KeepFirstError(&first, data.status());
      continue;
    }
    data->resize(std::min<uint64_t>(data->size(), state->synced));
    KeepFirstError(&first, WriteStringToFile(base(), path, *data, /*sync=*/true));
  }
  // Then the directory changes, newest first. A file that is already gone is fine.
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    absl::Status status;
    if (it->kind == DirOp::kCreate) {
      if (base()->FileExists(it->path)) status = base()->DeleteFile(it->path);
    } else if (base()->FileExists(it->path)) {
      status = base()->RenameFile(it->path, it->from);
    }
    KeepFirstError(&first, status);
  }
  files_.clear();
  pending_.clear();
  return first;
}

}  // namespace granary
