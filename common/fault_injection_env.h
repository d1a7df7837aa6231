// FaultInjectionEnv: an Env for tests that forwards to a base Env and can (a) fail fsyncs and
// (b) simulate a machine crash by dropping everything that was not made durable. It is the
// project's fault-injecting Env (DESIGN.md §8); the journal has its own RocksDB FileSystem
// counterpart (journal/fault_injection_fs.h). Modelled on leveldb's FaultInjectionTestEnv.
//
// Durability model (what DropUnsyncedData() throws away):
//   - File contents: bytes appended through a WritableFile of this Env are durable once that
//     file's Sync() returned OK. A crash truncates each such file to the length it had at its
//     last successful Sync() (0 if it was never synced).
//   - Directory entries: creating a file (NewWritableFile) and RenameFile are durable once
//     SyncDir() of the parent directory of the created file (of `to`, for a rename) returned OK
//     after them. A crash undoes the pending ones, newest first: a pending creation deletes the
//     file, a pending rename renames `to` back to `from`.
// Simplifications, by design: DeleteFile and CreateDirs are durable at once; a file that a
// rename overwrote is not brought back; files not created through this Env are never touched.
// Paths are compared as strings, so use one spelling per directory (no trailing '/', no "..").
//
// Thread-safe. DropUnsyncedData() REQUIRES that no WritableFile of this Env is still open and
// that no other call is in progress.
#ifndef GRANARY_COMMON_FAULT_INJECTION_ENV_H_
#define GRANARY_COMMON_FAULT_INJECTION_ENV_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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

  // Simulates a crash and reboot: applies the durability model above to the files written
  // through this Env, then forgets them (what survived is durable from now on). Returns the
  // first error of the base Env, after trying everything.
  absl::Status DropUnsyncedData();

  // The calls the durability model watches; everything else goes straight to the base.
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::Status RenameFile(const std::string& from, const std::string& to) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status SyncDir(const std::string& dir) override;

 private:
  class File;
  // Lengths of one file written through this Env; moves with the file on rename.
  struct FileState {
    uint64_t appended = 0;  // bytes appended so far
    uint64_t synced = 0;    // bytes durable (appended as of the last successful Sync)
  };
  // A directory change not yet made durable by SyncDir of `dir`.
  struct DirOp {
    enum Kind { kCreate, kRename } kind;
    std::string dir;
    std::string path;  // kCreate: the file; kRename: `to`
    std::string from;  // kRename only
  };

  // Called by File.
  absl::Status SyncFile(WritableFile* base_file, FileState* state);
  void Appended(FileState* state, uint64_t n);

  mutable absl::Mutex mu_;
  int fail_syncs_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t successful_syncs_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::shared_ptr<FileState>> files_ ABSL_GUARDED_BY(mu_);
  std::vector<DirOp> pending_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace granary

#endif  // GRANARY_COMMON_FAULT_INJECTION_ENV_H_
