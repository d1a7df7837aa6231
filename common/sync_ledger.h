// SyncLedger: a process's record of the durability events of its writes, so that a harness can
// make it lose power after the fact (DESIGN.md §8, issue 33). A SIGKILLed process's unsynced
// writes survive in the page cache; the ledger tells which of them a power loss would have
// dropped: ApplyPowerLoss replays the ledgers of a killed process into common/
// durability_model.h's model and applies it to the files before the process is restarted.
//
// The process appends one line per event (format: common/FORMAT.md, "The sync ledger") with
// one write(2) on an O_APPEND descriptor, never fsynced: the ledger only has to survive the
// kill of its writer, not a real power loss. An fsync's line is written after the fsync
// returned OK and before the call that synced returns, so no acknowledgement can precede its
// line; a creation's line is written before the file is created, so every byte written to it
// is covered. The wrappers that write the ledger: LedgerEnv (common/ledger_env.h) and
// LedgerFileSystem (journal/ledger_fs.h); the journal's high-water file, which is written in
// place through raw descriptors, records its syncs itself.
//
// Enabled for `granary dispatcher` and `granary worker` by the environment variable
// GRANARY_SYNC_LEDGER=<path of the ledger>.
//
// Thread-safe.
#ifndef GRANARY_COMMON_SYNC_LEDGER_H_
#define GRANARY_COMMON_SYNC_LEDGER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/durability_model.h"

namespace granary {

inline constexpr char kSyncLedgerEnvironmentVariable[] = "GRANARY_SYNC_LEDGER";

class SyncLedger {
 public:
  // Opens the ledger at `path`, creating it (with its header line) if missing, else appending
  // to it. Errors name `path`.
  static absl::StatusOr<std::unique_ptr<SyncLedger>> Open(const std::string& path);
  // The ledger GRANARY_SYNC_LEDGER names; nullptr if the variable is unset or empty.
  static absl::StatusOr<std::unique_ptr<SyncLedger>> OpenFromEnvironment();

  ~SyncLedger();
  SyncLedger(const SyncLedger&) = delete;
  SyncLedger& operator=(const SyncLedger&) = delete;

  // The events of DurabilityModel, each appended as one line. An error (naming the ledger)
  // means the event may not be recorded: the caller must fail the call it records.
  absl::Status Created(const std::string& path);
  absl::Status Truncated(const std::string& path);
  absl::Status Synced(const std::string& path, uint64_t length);
  absl::Status SyncedContent(const std::string& path, const std::string& content);
  absl::Status Renamed(const std::string& from, const std::string& to);
  absl::Status Deleted(const std::string& path);
  absl::Status DirSynced(const std::string& dir);

  const std::string& path() const { return path_; }

 private:
  SyncLedger(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Append(const std::string& line);

  const std::string path_;
  const int fd_;
};

// Replays the ledgers `paths`, in order (a process's incarnations since its last power loss),
// into a model. A missing ledger is skipped (that incarnation wrote nothing durable-relevant
// before it died); a last line without its newline is ignored (its writer was killed while
// writing it: the call it records never returned). Errors: DataLoss naming the ledger and line
// for a missing or unknown header, an unknown event or a malformed line.
absl::StatusOr<DurabilityModel> ReplaySyncLedgers(const std::vector<std::string>& paths);

// ReplaySyncLedgers, then DurabilityModel::Apply on the real files (Env::Default()), torn with
// `torn_seed` if set. REQUIRES: no process writes those files any more (its writer is dead).
absl::StatusOr<PowerLossReport> ApplyPowerLoss(const std::vector<std::string>& ledgers,
                                               std::optional<uint64_t> torn_seed);

}  // namespace granary

#endif  // GRANARY_COMMON_SYNC_LEDGER_H_
