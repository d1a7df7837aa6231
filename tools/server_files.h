// ServerFiles: the Env a dispatcher's or worker's files go through, stacked from the chaos
// harness's environment variables (issue 33) — each layer a no-op unless its variable is set:
//   the clock: a SkewedClockEnv under GRANARY_CHAOS_CLOCK (faultinject/skewed_clock_env.h),
//   then failing or slow disks under GRANARY_DISK_FAULTS (server_disk_faults.h),
//   then the sync ledger under GRANARY_SYNC_LEDGER (common/ledger_env.h), topmost, so that it
//   records only what the disk below acknowledged.
// Unset, env() is Env::Default().
#ifndef GRANARY_TOOLS_SERVER_FILES_H_
#define GRANARY_TOOLS_SERVER_FILES_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/env.h"
#include "common/ledger_env.h"
#include "common/sync_ledger.h"
#include "rocksdb/file_system.h"
#include "tools/server_disk_faults.h"

namespace granary {

class ServerFiles {
 public:
  // The errors of ServerDiskFaults::FromEnvironment (an unparsable control file) and
  // ServerFileEnv::FromEnvironment (a ledger that cannot be opened), each naming the file.
  static absl::StatusOr<std::unique_ptr<ServerFiles>> FromEnvironment();

  // The process's files (checkpoints, cache, the capability key). Lives as long as this object.
  Env* env() const { return files_->env(); }
  // The journal's RocksDB file system (DispatcherOptions::journal_file_system): nullptr unless
  // disks fail.
  std::shared_ptr<rocksdb::FileSystem> journal_file_system() const {
    return disk_faults_->journal_file_system();
  }
  // DispatcherOptions::sync_ledger: nullptr unless GRANARY_SYNC_LEDGER is set.
  SyncLedger* ledger() const { return files_->ledger(); }

 private:
  ServerFiles() = default;

  std::unique_ptr<ServerDiskFaults> disk_faults_;
  std::unique_ptr<ServerFileEnv> files_;  // Over disk_faults_'s Env.
};

}  // namespace granary

#endif  // GRANARY_TOOLS_SERVER_FILES_H_
