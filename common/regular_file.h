// OpenRegularFile: opens a file of data for reading on the POSIX filesystem only if it is a
// regular file, never blocking in open() and never following a symlink as its last component,
// and says where the opened file really is. For readers of untrusted paths (ConfinedEnv,
// security/confined_env.h), which must not hang on a FIFO, stream /dev/zero, hand out /proc, or
// be sent elsewhere by a symlink swapped in after they checked the path. Implemented beside the
// POSIX Env (common/posix_env.cc), whose files it returns. Thread-safe.
#ifndef GRANARY_COMMON_REGULAR_FILE_H_
#define GRANARY_COMMON_REGULAR_FILE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/env.h"

namespace granary {

struct OpenedRegularFile {
  std::unique_ptr<SequentialFile> file;
  // Where the opened file really is: the canonical path the system gives its descriptor
  // (/proc/self/fd/N), whatever was renamed or swapped for a symlink since the path was looked at.
  std::string real_path;
};

// Opens `path` for reading. Refused, naming the path and what it is:
//   InvalidArgument "<path> is a FIFO (named pipe), not a regular file" (likewise a character
//   device, a block device, a directory, a socket), or "<path> is a file of the kernel's proc
//   filesystem, not a data file" (or sys);
//   PermissionDenied "<path> is a symbolic link, which is not followed" for a symlink as its last
//   component (earlier components are followed: see real_path).
// NotFound if it does not exist; the errors of open() otherwise. Needs /proc mounted.
absl::StatusOr<OpenedRegularFile> OpenRegularFile(const std::string& path);

}  // namespace granary

#endif  // GRANARY_COMMON_REGULAR_FILE_H_
