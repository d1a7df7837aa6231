// LedgerEnv: an Env that records the durability events of the writes through it in a sync
// ledger (common/sync_ledger.h), so that a harness can make this process lose power after
// killing it. Everything else forwards to the base Env unchanged. Used by `granary dispatcher`
// and `granary worker` when GRANARY_SYNC_LEDGER is set (checkpoints, cache chunks and
// manifests go through their Env).
//
// A failure to append to the ledger fails the call it records (after the base call was made):
// an fsync that could not be recorded is not acknowledged.
//
// Thread-safe.
#ifndef GRANARY_COMMON_LEDGER_ENV_H_
#define GRANARY_COMMON_LEDGER_ENV_H_

#include <memory>
#include <string>

#include "common/env_wrapper.h"
#include "common/sync_ledger.h"

namespace granary {

class LedgerEnv : public EnvWrapper {
 public:
  // `base` and `ledger` must outlive this Env.
  LedgerEnv(Env* base, SyncLedger* ledger) : EnvWrapper(base), ledger_(ledger) {}

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status SyncDir(const std::string& dir) override;

 private:
  SyncLedger* const ledger_;
};

// The files of a server process (`granary dispatcher`, `granary worker`): Env::Default(), or —
// when GRANARY_SYNC_LEDGER is set — a LedgerEnv over it recording in that ledger.
class ServerFileEnv {
 public:
  // Errors: the ledger GRANARY_SYNC_LEDGER names cannot be opened (the message names both).
  // The ledger's Env wraps `base` (e.g. a DiskFaultEnv), which must outlive this object.
  static absl::StatusOr<std::unique_ptr<ServerFileEnv>> FromEnvironment(Env* base = Env::Default());

  Env* env() const { return ledger_env_ != nullptr ? ledger_env_.get() : base_; }
  // nullptr unless GRANARY_SYNC_LEDGER is set.
  SyncLedger* ledger() const { return ledger_.get(); }

 private:
  ServerFileEnv() = default;
  Env* base_ = nullptr;
  std::unique_ptr<SyncLedger> ledger_;
  std::unique_ptr<LedgerEnv> ledger_env_;
};

}  // namespace granary

#endif  // GRANARY_COMMON_LEDGER_ENV_H_
