// ManualClockEnv: an Env whose clock only moves when told to; files go to a base Env. For
// tests of timeouts (the failure detector) that must not depend on the machine's speed.
// Thread-safe.
#ifndef GRANARY_COMMON_MANUAL_CLOCK_ENV_H_
#define GRANARY_COMMON_MANUAL_CLOCK_ENV_H_

#include <atomic>

#include "common/env.h"

namespace granary {

class ManualClockEnv : public Env {
 public:
  explicit ManualClockEnv(Env* base, uint64_t start_micros = 1'000'000)
      : base_(base), now_(start_micros) {}

  void AdvanceMicros(uint64_t micros) { now_ += micros; }

  uint64_t NowMicros() override { return now_; }
  // Advances the clock instead of sleeping.
  void SleepForMicros(uint64_t micros) override { AdvanceMicros(micros); }

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
  absl::Status SyncDir(const std::string& dir) override { return base_->SyncDir(dir); }

 private:
  Env* const base_;
  std::atomic<uint64_t> now_;
};

}  // namespace granary

#endif  // GRANARY_COMMON_MANUAL_CLOCK_ENV_H_
