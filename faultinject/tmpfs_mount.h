// TmpfsMount: a small tmpfs mounted on a directory, to run out of disk space for real — the
// chaos harness's full disks (issue 33) and the full-disk tests (testing/scoped_tmpfs.h). Fill()
// writes a filler file until the file system is full; deleting the filler frees the space
// again. Mounting needs root (CAP_SYS_ADMIN). Thread-compatible.
#ifndef GRANARY_FAULTINJECT_TMPFS_MOUNT_H_
#define GRANARY_FAULTINJECT_TMPFS_MOUNT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace granary {

class TmpfsMount {
 public:
  // Mounts a tmpfs of `size_bytes` on `dir` (created if missing). FailedPrecondition saying it
  // needs root unless the process runs as root; the failed mkdir or mount, naming `dir`.
  static absl::StatusOr<std::unique_ptr<TmpfsMount>> Mount(const std::string& dir,
                                                           int64_t size_bytes);
  // Unmounts unless Unmount() did; logs a failure.
  ~TmpfsMount();
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

  // Appends to the file `name` until the file system is full (ENOSPC). Returns the bytes
  // written; the failed open or a write error other than ENOSPC, naming the file.
  absl::StatusOr<int64_t> Fill(const std::string& name);

  // Unmounts, lazily (a file still open does not keep it mounted). The failed umount, naming
  // the path. REQUIRES: not unmounted yet.
  absl::Status Unmount();

 private:
  explicit TmpfsMount(std::string path) : path_(std::move(path)) {}

  const std::string path_;
  bool mounted_ = true;
};

}  // namespace granary

#endif  // GRANARY_FAULTINJECT_TMPFS_MOUNT_H_
