#include "common/history_log.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace granary {
namespace {

// The process name of a history file: its base name up to the first '.'.
std::string ProcessOfPath(absl::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash != absl::string_view::npos) path.remove_prefix(slash + 1);
  return std::string(path.substr(0, path.find('.')));
}

}  // namespace

HistoryLog* HistoryLog::OpenGlobal() {
  const char* path = std::getenv(kHistoryEnvironmentVariable);
  if (path == nullptr || *path == '\0') return nullptr;
  absl::StatusOr<std::unique_ptr<HistoryLog>> log = HistoryLog::Open(path, ProcessOfPath(path));
  if (!log.ok()) {
    LOG(ERROR) << "no history (" << kHistoryEnvironmentVariable << "): " << log.status();
    return nullptr;
  }
  return log->release();  // Lives as long as the process: the last lines may come at exit.
}

absl::StatusOr<std::unique_ptr<HistoryLog>> HistoryLog::Open(const std::string& path,
                                                             std::string process) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("history file ", path, ": open: ", std::strerror(errno)));
  }
  return std::unique_ptr<HistoryLog>(new HistoryLog(fd, std::move(process)));
}

HistoryLog::~HistoryLog() { ::close(fd_); }

int64_t HistoryLog::MonotonicNanos() {
  struct timespec now;
  // The system call itself: libfaketime interposes clock_gettime() (and the vDSO path), not it.
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

void HistoryLog::Record(absl::string_view op, absl::string_view phase, absl::string_view fields) {
  absl::MutexLock lock(&mu_);
  if (failed_) return;
  // Under the lock: the file's lines are in seq and time order.
  const std::string line = absl::StrCat(MonotonicNanos(), "\t", ++seq_, "\t", process_, "\t", op,
                                        "\t", phase, "\t", fields, "\n");
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_ = true;
      LOG(ERROR) << "history of " << process_ << ": write failed (" << std::strerror(errno)
                 << "); recording no more";
      return;
    }
    written += static_cast<size_t>(n);
  }
}

}  // namespace granary
