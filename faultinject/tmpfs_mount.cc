#include "faultinject/tmpfs_mount.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "glog/logging.h"

namespace granary {

absl::StatusOr<std::unique_ptr<TmpfsMount>> TmpfsMount::Mount(const std::string& dir,
                                                              int64_t size_bytes) {
  if (::geteuid() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("mounting a tmpfs on ", dir, " (to fill a disk for real) needs root"));
  }
  if (absl::Status made = Env::Default()->CreateDirs(dir); !made.ok()) return made;
  const std::string data = absl::StrCat("size=", size_bytes);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, data.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("mount -t tmpfs -o ", data, " ", dir, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<TmpfsMount>(new TmpfsMount(dir));
}

TmpfsMount::~TmpfsMount() {
  if (!mounted_) return;
  if (absl::Status unmounted = Unmount(); !unmounted.ok()) LOG(ERROR) << unmounted;
}

absl::Status TmpfsMount::Unmount() {
  mounted_ = false;
  if (::umount2(path_.c_str(), MNT_DETACH) != 0) {
    return absl::InternalError(absl::StrCat("umount ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> TmpfsMount::Fill(const std::string& name) {
  const std::string file = Join(name);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", file, ": ", std::strerror(errno)));
  const std::string chunk(4096, 'x');
  int64_t written = 0;
  absl::Status status;
  for (;;) {
    const ssize_t n = ::write(fd, chunk.data(), chunk.size());
    if (n > 0) {
      written += n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != ENOSPC) {
      status = absl::InternalError(absl::StrCat("write ", file, ": ", std::strerror(errno)));
    }
    break;
  }
  ::close(fd);
  if (!status.ok()) return status;
  return written;
}

}  // namespace granary
