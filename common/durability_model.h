// DurabilityModel: what of the files one process wrote survives a power loss, given the
// durability events of those writes in the order they happened (DESIGN.md §8). Shared by the
// in-process fake (FaultInjectionEnv) and the replay of a separate process's sync ledger
// (common/sync_ledger.h), so both drop exactly the same writes.
//
// The model:
//   - File contents: a file's bytes up to the length of its last successful fsync are durable;
//     a power loss truncates it to that length (0 if it was created or truncated and never
//     synced since). A file written in place (not appended to: the journal's high-water file)
//     reverts to the content of its last successful fsync.
//   - Directory entries: creating a file and renaming one are durable once the parent
//     directory (of the created file; of `to` for a rename) was fsynced after them. A power
//     loss undoes the pending ones, newest first: a pending creation deletes the file, a
//     pending rename renames `to` back to `from`.
// Simplifications, by design: deleting a file and creating a directory are durable at once; a
// file that a rename overwrote is not brought back; files no event names are never touched;
// an event names a file by the path it had when it was opened (a file is not renamed while
// open for writing). Paths are compared as strings after collapsing repeated and trailing
// slashes, so use one spelling per directory (no "..", no symbolic links).
//
// Torn writes (Apply with a seed): instead of dropping a file's whole unsynced tail, a random
// prefix of it survives, and sometimes the last block (4 KiB) of what survives beyond the synced
// length is garbled — a disk without atomic sectors. A file written in place keeps either its
// synced or its current content (it fits in one sector). Synced bytes are never changed.
//
// Thread-compatible.
#ifndef GRANARY_COMMON_DURABILITY_MODEL_H_
#define GRANARY_COMMON_DURABILITY_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace granary {

// What one power loss dropped.
struct PowerLossReport {
  int64_t files_cut = 0;         // files truncated (or torn) to less than they held
  int64_t bytes_dropped = 0;     // bytes those files lost
  int64_t files_garbled = 0;     // torn: files whose surviving tail was garbled
  int64_t files_reverted = 0;    // in-place files put back to their synced content
  int64_t creations_undone = 0;  // files deleted: created, but the directory never synced
  int64_t renames_undone = 0;    // renames undone: the directory never synced

  void Add(const PowerLossReport& other);
  // e.g. "dropped 4096 bytes of 2 files (0 garbled), reverted 1 in-place file, deleted 3
  // files, undid 1 rename".
  std::string Describe() const;
};

class DurabilityModel {
 public:
  // The durability events, in the order they happened.
  // `path` was created (it did not exist): empty and not durable.
  void Created(const std::string& path);
  // The existing `path` was opened for writing from its start (truncated).
  void Truncated(const std::string& path);
  // An fsync of `path` returned OK when it was `length` bytes long.
  void Synced(const std::string& path, uint64_t length);
  // An fsync of `path`, written in place, returned OK when it held `content`.
  void SyncedContent(const std::string& path, std::string content);
  // `from` was renamed to `to`.
  void Renamed(const std::string& from, const std::string& to);
  void Deleted(const std::string& path);
  // An fsync of directory `dir` returned OK.
  void DirSynced(const std::string& dir);

  // Simulates the power loss on the files through `env` (which must not be the Env recording
  // the events): applies the model above — torn, with the seeded draws, if `torn_seed` is set —
  // then forgets every event (what survived is durable from now on). Tries everything, then
  // returns the first error of `env`; files already gone are skipped.
  absl::StatusOr<PowerLossReport> Apply(Env* env, std::optional<uint64_t> torn_seed);

 private:
  struct FileState {
    uint64_t synced = 0;                 // durable length
    std::optional<std::string> content;  // written in place: the durable content
  };
  // A directory change not yet made durable by a sync of `dir`.
  struct DirOp {
    enum Kind { kCreate, kRename } kind;
    std::string dir;
    std::string path;  // kCreate: the file; kRename: `to`
    std::string from;  // kRename only
  };

  std::map<std::string, FileState> files_;
  std::vector<DirOp> pending_;  // oldest first
};

}  // namespace granary

#endif  // GRANARY_COMMON_DURABILITY_MODEL_H_
