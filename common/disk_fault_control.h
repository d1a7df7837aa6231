// DiskFaultControl: the disk faults a process is told to suffer right now, read from a control
// file that another process (the chaos harness) rewrites while this one runs (issue 33). The
// Env wrapper DiskFaultEnv (checkpoints, cache) and the RocksDB wrapper DiskFaultFileSystem
// (the journal) ask it before each file operation. It injects what a failing or slow disk does
// in-process, because this kernel has no dm-flakey or dm-delay; a full disk is a real tmpfs
// filled up instead (faultinject/tmpfs_mount.h).
//
// The control file has one fault per line; an empty (or missing) file means a healthy disk:
//   eio <read|write|sync> <path-prefix>             the operation fails with EIO
//   stall <read|write|sync> <path-prefix> <delay>   the operation waits <delay> (e.g. 3000ms, 2s)
//                                                   first, then runs
// `#` starts a comment line; blank lines are ignored. A fault applies to every path that starts
// with <path-prefix> (compared as text). Which operation is which:
//   read   opening a file to read, reading or skipping in it, listing a directory, a file's size
//   write  creating a file, appending to, flushing, truncating or closing it, renaming,
//          deleting, creating or removing a directory
//   sync   fsync of a file (RocksDB: Sync, Fsync, RangeSync) or of a directory
// The file is re-read at most every 50 ms; a writer should replace it atomically (write a
// temporary file, rename it over). Thread-safe.
#ifndef GRANARY_COMMON_DISK_FAULT_CONTROL_H_
#define GRANARY_COMMON_DISK_FAULT_CONTROL_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace granary {

// The environment variable naming a process's control file; unset: no injected disk faults.
inline constexpr char kDiskFaultsEnvironmentVariable[] = "GRANARY_DISK_FAULTS";

enum class DiskOp { kRead, kWrite, kSync };

// "read", "write" or "sync".
absl::string_view DiskOpName(DiskOp op);

struct DiskFault {
  enum class Kind { kEio, kStall };
  Kind kind = Kind::kEio;
  DiskOp op = DiskOp::kWrite;
  std::string path_prefix;
  absl::Duration stall = absl::ZeroDuration();  // kStall only; > 0.
};

// The faults of a control file's text. InvalidArgument naming `file` and the line (1-based) for
// a line that is not one of the forms above.
absl::StatusOr<std::vector<DiskFault>> ParseDiskFaults(absl::string_view text,
                                                       absl::string_view file);

// One control file's line, as written by a harness (the inverse of ParseDiskFaults).
std::string DiskFaultLine(const DiskFault& fault);

// Replaces the control file `file` with `text` atomically (a temporary file beside it, renamed
// over it), as its writer must: a reader never sees half of it.
absl::Status ReplaceDiskFaultControlFile(const std::string& file, absl::string_view text);

class DiskFaultControl {
 public:
  // Follows `control_file`. Its parse error (ParseDiskFaults) if it exists and cannot be parsed
  // now; a missing file is a healthy disk.
  static absl::StatusOr<std::unique_ptr<DiskFaultControl>> Open(std::string control_file);
  // Follows the file kDiskFaultsEnvironmentVariable names; nullptr if it is unset or empty.
  static absl::StatusOr<std::unique_ptr<DiskFaultControl>> FromEnvironment();

  // To be called before the operation `op` on `path`: waits out every matching stall, then
  // returns Internal ("<op> <path>: Input/output error (injected by <file>)") if an eio fault
  // matches, else OK. A control file that became unparsable keeps the faults read before it,
  // logging its error.
  absl::Status Before(DiskOp op, absl::string_view path) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& control_file() const { return control_file_; }

 private:
  explicit DiskFaultControl(std::string control_file) : control_file_(std::move(control_file)) {}
  // Reads the control file: its faults, none if it is missing.
  absl::StatusOr<std::vector<DiskFault>> Read() const;
  // The faults now (the file re-read if the last reading is 50 ms old).
  std::vector<DiskFault> Current() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string control_file_;
  absl::Mutex mu_;
  std::vector<DiskFault> faults_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point read_at_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_COMMON_DISK_FAULT_CONTROL_H_
