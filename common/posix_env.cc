// The POSIX implementation of Env.
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/env.h"
#include "common/regular_file.h"
#include "common/status_macros.h"

namespace granary {
namespace {

absl::Status PosixError(absl::string_view context, int err) {
  const std::string message = absl::StrCat(context, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

// What a file of mode `mode` is, for "<path> is <this>, not a regular file".
std::string FileTypeName(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return absl::StrFormat("of type %o", mode & S_IFMT);
}

absl::Status NotRegular(const std::string& path, mode_t mode) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, " is ", FileTypeName(mode), ", not a regular file"));
}

// The kernel's pseudo-filesystem `fd` is on, if it is /proc or /sys (whose "regular" files are
// the process's environment, memory maps, kernel state), else null.
const char* PseudoFilesystem(int fd) {
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0) return nullptr;
  if (fs.f_type == PROC_SUPER_MAGIC) return "proc";
  if (fs.f_type == SYSFS_MAGIC) return "sys";
  return nullptr;
}

// Checks that the open descriptor `fd` of `path` is a regular file of data and makes its reads
// blocking again; its canonical path on success.
absl::StatusOr<std::string> CheckRegularFile(const std::string& path, int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return PosixError(absl::StrCat("stat ", path), errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  if (const char* pseudo = PseudoFilesystem(fd); pseudo != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a file of the kernel's ", pseudo, " filesystem, not a data file"));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return PosixError(absl::StrCat("fcntl ", path), errno);
  }
  char real[PATH_MAX];
  const std::string link = absl::StrCat("/proc/self/fd/", fd);
  const ssize_t n = ::readlink(link.c_str(), real, sizeof(real));
  if (n < 0 || n == sizeof(real)) {
    return PosixError(absl::StrCat("open ", path, ": readlink ", link, " (is /proc mounted?)"),
                      n < 0 ? errno : ENAMETOOLONG);
  }
  return std::string(real, n);
}

class PosixSequentialFile : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixSequentialFile() override { ::close(fd_); }

  absl::StatusOr<size_t> Read(size_t n, char* scratch) override {
    while (true) {
      const ssize_t r = ::read(fd_, scratch, n);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno != EINTR) return PosixError(absl::StrCat("read ", path_), errno);
    }
  }

  absl::Status Skip(uint64_t n) override {
    if (::lseek(fd_, static_cast<off_t>(n), SEEK_CUR) < 0) {
      return PosixError(absl::StrCat("seek ", path_), errno);
    }
    return absl::OkStatus();
  }

  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  const int fd_;
};

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) Close().IgnoreError();
  }

  absl::Status Append(absl::string_view data) override {
    buffer_.append(data.data(), data.size());
    if (buffer_.size() >= kBufferSize) return Flush();
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    size_t written = 0;
    while (written < buffer_.size()) {
      const ssize_t w = ::write(fd_, buffer_.data() + written, buffer_.size() - written);
      if (w < 0) {
        if (errno == EINTR) continue;
        return PosixError(absl::StrCat("write ", path_), errno);
      }
      written += static_cast<size_t>(w);
    }
    buffer_.clear();
    return absl::OkStatus();
  }

  absl::Status Sync() override {
    RETURN_IF_ERROR(Flush());
    if (::fsync(fd_) != 0) return PosixError(absl::StrCat("fsync ", path_), errno);
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("close ", path_, ": already closed"));
    absl::Status status = Flush();
    if (::close(fd_) != 0 && status.ok()) {
      status = PosixError(absl::StrCat("close ", path_), errno);
    }
    fd_ = -1;
    return status;
  }

  const std::string& path() const override { return path_; }

 private:
  static constexpr size_t kBufferSize = 1 << 16;
  const std::string path_;
  int fd_;
  std::string buffer_;
};

class PosixEnv : public Env {
 public:
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PosixError(absl::StrCat("open ", path), errno);
    return std::make_unique<PosixSequentialFile>(path, fd);
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return PosixError(absl::StrCat("create ", path), errno);
    return std::make_unique<PosixWritableFile>(path, fd);
  }

  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }

  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return PosixError(absl::StrCat("stat ", path), errno);
    return static_cast<uint64_t>(st.st_size);
  }

  absl::StatusOr<std::vector<std::string>> Glob(const std::string& pattern) override {
    glob_t g;
    const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
    std::vector<std::string> paths;
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) paths.emplace_back(g.gl_pathv[i]);
    }
    ::globfree(&g);
    if (rc != 0 && rc != GLOB_NOMATCH) {
      return absl::InternalError(absl::StrCat("glob ", pattern, ": read error"));
    }
    std::sort(paths.begin(), paths.end());
    return paths;
  }

  absl::StatusOr<std::vector<std::string>> GetChildren(const std::string& dir) override {
    std::error_code ec;
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      names.push_back(entry.path().filename().string());
    }
    if (ec) return PosixError(absl::StrCat("list ", dir), ec.value());
    std::sort(names.begin(), names.end());
    return names;
  }

  absl::Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return PosixError(absl::StrCat("rename ", from, " to ", to), errno);
    }
    return absl::OkStatus();
  }

  absl::Status DeleteFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return PosixError(absl::StrCat("delete ", path), errno);
    return absl::OkStatus();
  }

  absl::Status CreateDirs(const std::string& dir) override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return PosixError(absl::StrCat("mkdir ", dir), ec.value());
    return absl::OkStatus();
  }

  absl::Status DeleteDir(const std::string& dir) override {
    if (::rmdir(dir.c_str()) != 0) return PosixError(absl::StrCat("rmdir ", dir), errno);
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return PosixError(absl::StrCat("open dir ", dir), errno);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) return PosixError(absl::StrCat("fsync dir ", dir), err);
    return absl::OkStatus();
  }

  uint64_t NowMicros() override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void SleepForMicros(uint64_t micros) override {
    std::this_thread::sleep_for(std::chrono::microseconds(micros));
  }
};

}  // namespace

Env* Env::Default() {
  static Env* const env = new PosixEnv();
  return env;
}

absl::StatusOr<OpenedRegularFile> OpenRegularFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer, forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    struct stat st;
    if (err == ELOOP && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, " is a symbolic link, which is not followed"));
    }
    // ENXIO: a socket, or a device without a driver.
    if (err == ENXIO && ::stat(path.c_str(), &st) == 0) return NotRegular(path, st.st_mode);
    return PosixError(absl::StrCat("open ", path), err);
  }
  absl::StatusOr<std::string> real_path = CheckRegularFile(path, fd);
  if (!real_path.ok()) {
    ::close(fd);
    return real_path.status();
  }
  return OpenedRegularFile{std::make_unique<PosixSequentialFile>(path, fd), *std::move(real_path)};
}

absl::StatusOr<std::string> ReadFileToString(Env* env, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, env->NewSequentialFile(path));
  std::string data;
  char buf[1 << 16];
  while (true) {
    ASSIGN_OR_RETURN(size_t n, file->Read(sizeof(buf), buf));
    if (n == 0) break;
    data.append(buf, n);
  }
  return data;
}

absl::Status WriteStringToFile(Env* env, const std::string& path, absl::string_view data,
                               bool sync) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, env->NewWritableFile(path));
  RETURN_IF_ERROR(file->Append(data));
  if (sync) RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

}  // namespace granary
