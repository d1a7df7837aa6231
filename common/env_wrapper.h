// EnvWrapper: an Env that forwards every call to a base Env, for Envs that change only a few
// calls (a fake clock, injected faults) — derive and override those. Thread-safe if the base is.
#ifndef GRANARY_COMMON_ENV_WRAPPER_H_
#define GRANARY_COMMON_ENV_WRAPPER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/env.h"

namespace granary {

class EnvWrapper : public Env {
 public:
  // `base` must outlive this Env.
  explicit EnvWrapper(Env* base) : base_(base) {}

  Env* base() const { return base_; }

  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override {
    return base_->NewSequentialFile(path);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return base_->NewWritableFile(path);
  }
  bool FileExists(const std::string& path) override { return base_->FileExists(path); }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    return base_->GetFileSize(path);
  }
  absl::StatusOr<std::vector<std::string>> Glob(const std::string& pattern) override {
    return base_->Glob(pattern);
  }
  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    return base_->GetChildren(dir);
  }
  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    return base_->RenameFile(from, to);
  }
  absl::Status DeleteFile(const std::string& path) override { return base_->DeleteFile(path); }
  absl::Status CreateDirs(const std::string& dir) override { return base_->CreateDirs(dir); }
  absl::Status DeleteDir(const std::string& dir) override { return base_->DeleteDir(dir); }
  absl::Status SyncDir(const std::string& dir) override { return base_->SyncDir(dir); }
  uint64_t NowMicros() override { return base_->NowMicros(); }
  void SleepForMicros(uint64_t micros) override { base_->SleepForMicros(micros); }

 private:
  Env* const base_;
};

// A WritableFile that forwards to a base file, counting the bytes appended, and hands each
// Sync() to `sync` with the base file and that count (for Envs that watch syncs: the durable
// length is the count when the sync began). Thread-compatible, like every WritableFile.
class SyncWatchingFile : public WritableFile {
 public:
  using SyncFunction = std::function<absl::Status(WritableFile* base, uint64_t appended)>;
  SyncWatchingFile(std::unique_ptr<WritableFile> base, SyncFunction sync)
      : base_(std::move(base)), sync_(std::move(sync)) {}

  absl::Status Append(absl::string_view data) override {
    absl::Status status = base_->Append(data);
    if (status.ok()) appended_ += data.size();
    return status;
  }
  absl::Status Flush() override { return base_->Flush(); }
  absl::Status Sync() override { return sync_(base_.get(), appended_); }
  absl::Status Close() override { return base_->Close(); }
  const std::string& path() const override { return base_->path(); }

 private:
  const std::unique_ptr<WritableFile> base_;
  const SyncFunction sync_;
  uint64_t appended_ = 0;
};

}  // namespace granary

#endif  // GRANARY_COMMON_ENV_WRAPPER_H_
