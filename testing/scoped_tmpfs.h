// ScopedTmpfs: a small tmpfs (faultinject/tmpfs_mount.h) mounted on a fresh directory for one
// test, to run out of disk space for real. Test-only (it uses GoogleTest). Needs root
// (CAP_SYS_ADMIN); callers skip the test when ok() is false, with skip_reason().
#ifndef GRANARY_TESTING_SCOPED_TMPFS_H_
#define GRANARY_TESTING_SCOPED_TMPFS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "faultinject/tmpfs_mount.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary::testing {

class ScopedTmpfs {
 public:
  // Mounts a tmpfs of `size_bytes` on a fresh directory.
  explicit ScopedTmpfs(int64_t size_bytes) {
    absl::StatusOr<std::unique_ptr<TmpfsMount>> mount =
        TmpfsMount::Mount(dir_.Join("tmpfs"), size_bytes);
    if (mount.ok()) {
      mount_ = *std::move(mount);
    } else {
      skip_reason_ = std::string(mount.status().message());
    }
  }
  ~ScopedTmpfs() {
    if (mount_ != nullptr) {
      EXPECT_TRUE(mount_->Unmount().ok()) << "umount " << path();
    }
  }
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;

  bool ok() const { return mount_ != nullptr; }
  const std::string& skip_reason() const { return skip_reason_; }
  // REQUIRES: ok().
  const std::string& path() const { return mount_->path(); }
  std::string Join(const std::string& name) const { return mount_->Join(name); }

  // Writes the file `name` until the file system is full (ENOSPC). Returns the bytes written.
  int64_t Fill(const std::string& name) {
    absl::StatusOr<int64_t> written = mount_->Fill(name);
    EXPECT_TRUE(written.ok()) << written.status();
    return written.ok() ? *written : 0;
  }

 private:
  ScopedTempDir dir_;  // Declared first: unmounted before it is removed.
  std::unique_ptr<TmpfsMount> mount_;
  std::string skip_reason_;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTING_SCOPED_TMPFS_H_
