// ScopedTmpfs: a small tmpfs mounted for one test, to run out of disk space for real.
// Header-only and test-only (it uses GoogleTest). Needs root (CAP_SYS_ADMIN); callers skip the
// test when ok() is false, with skip_reason().
#ifndef GRANARY_TESTING_SCOPED_TMPFS_H_
#define GRANARY_TESTING_SCOPED_TMPFS_H_

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary::testing {

class ScopedTmpfs {
 public:
  // Mounts a tmpfs of `size_bytes` on a fresh directory.
  explicit ScopedTmpfs(int64_t size_bytes) {
    if (::geteuid() != 0) {
      skip_reason_ = "needs root to mount a tmpfs (to fill a disk for real)";
      return;
    }
    path_ = dir_.Join("tmpfs");
    if (::mkdir(path_.c_str(), 0755) != 0) {
      skip_reason_ = absl::StrCat("mkdir ", path_, ": ", std::strerror(errno));
      return;
    }
    const std::string data = absl::StrCat("size=", size_bytes);
    if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, data.c_str()) != 0) {
      skip_reason_ =
          absl::StrCat("mount -t tmpfs -o ", data, " ", path_, ": ", std::strerror(errno));
      return;
    }
    mounted_ = true;
  }
  // Unmounts (lazily, so that a file still open does not keep it mounted).
  ~ScopedTmpfs() {
    if (mounted_ && ::umount2(path_.c_str(), MNT_DETACH) != 0) {
      ADD_FAILURE() << "umount " << path_ << ": " << std::strerror(errno);
    }
  }
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;

  bool ok() const { return mounted_; }
  const std::string& skip_reason() const { return skip_reason_; }
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

  // Writes the file `name` until the file system is full (ENOSPC). Returns the bytes written.
  int64_t Fill(const std::string& name) {
    const std::string file = Join(name);
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      ADD_FAILURE() << "open " << file << ": " << std::strerror(errno);
      return 0;
    }
    const std::string chunk(4096, 'x');
    int64_t written = 0;
    for (;;) {
      const ssize_t n = ::write(fd, chunk.data(), chunk.size());
      if (n > 0) {
        written += n;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != ENOSPC)
        ADD_FAILURE() << "write " << file << ": " << std::strerror(errno);
      break;
    }
    ::close(fd);
    return written;
  }

 private:
  ScopedTempDir dir_;
  std::string path_;
  bool mounted_ = false;
  std::string skip_reason_;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTING_SCOPED_TMPFS_H_
