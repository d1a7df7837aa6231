// The POSIX implementation of Env.
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/env.h"
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
