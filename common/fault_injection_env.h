// FaultInjectionEnv: an Env for tests that forwards to a base Env and can (a) fail fsyncs and
// (b) simulate a machine crash by dropping everything that was not made durable. It is the
// project's fault-injecting Env (DESIGN.md §8); the journal has its own RocksDB FileSystem
// counterpart (journal/fault_injection_fs.h). Modelled on leveldb's FaultInjectionTestEnv.
//
// What DropUnsyncedData() throws away is common/durability_model.h's model, applied to the
// files written through this Env: contents beyond a file's last successful Sync(), creations
// and renames not followed by a SyncDir() of their directory. A separate process gets the same
// model through its sync ledger (common/sync_ledger.h).
//
// Thread-safe. DropUnsyncedData() REQUIRES that no WritableFile of this Env is still open and
// that no other call is in progress.
#ifndef GRANARY_COMMON_FAULT_INJECTION_ENV_H_
#define GRANARY_COMMON_FAULT_INJECTION_ENV_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/durability_model.h"
#include "common/env_wrapper.h"

namespace granary {

class FaultInjectionEnv : public EnvWrapper {
 public:
  // `base` must outlive this Env.
  explicit FaultInjectionEnv(Env* base) : EnvWrapper(base) {}

  // The next `n` WritableFile::Sync() calls fail with InternalError naming the file, without
  // syncing anything (the file's durable length stays what it was).
  void FailNextSyncs(int n);
  // Number of WritableFile::Sync() calls that succeeded so far.
  int64_t successful_syncs() const;

  // Simulates a crash and reboot: applies the durability model to the files written through
  // this Env (torn writes, seeded, if `torn_seed` is set), then forgets them (what survived is
  // durable from now on). Returns what was dropped, or the first error of the base Env after
  // trying everything.
  absl::StatusOr<PowerLossReport> DropUnsyncedData(
      std::optional<uint64_t> torn_seed = std::nullopt);

  // The calls the durability model watches; everything else goes straight to the base.
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status SyncDir(const std::string& dir) override;

 private:
  // Syncs `base_file`, `appended` bytes long (a SyncWatchingFile's sync).
  absl::Status SyncFile(WritableFile* base_file, uint64_t appended);

  mutable absl::Mutex mu_;
  int fail_syncs_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t successful_syncs_ ABSL_GUARDED_BY(mu_) = 0;
  DurabilityModel model_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_COMMON_FAULT_INJECTION_ENV_H_
