// HistoryLog: a Jepsen-style history of what one process did (issue 33's checker,
// faultinject/history_checker.h): one append-only file per process incarnation, one line per
// operation, in the format of common/FORMAT.md:
//   <mono_ns> TAB <seq> TAB <process> TAB <op> TAB <phase> TAB <k=v k=v …>
// mono_ns is CLOCK_MONOTONIC read through the raw system call (libfaketime, which the chaos
// harness uses to fake clocks, cannot fake it), so the lines of every process on the host are
// ordered by one clock; seq counts the file's lines from 1. Each line is one write(2) to a file
// opened with O_APPEND, under a mutex, so a SIGKILL leaves whole lines only (at worst a power
// loss tears the last one, which the checker ignores); nothing is fsynced.
//
// The process-global log (Global) writes to the file the environment variable GRANARY_HISTORY
// names, and is disabled without it: GRANARY_HISTORY_RECORD then costs one predictable branch
// on a static and does not evaluate its fields. A failure to open or write the file is logged
// once (LOG(ERROR)) and disables the log: a history is a test's instrument, never a reason for
// a server to fail.
//
// Thread-safe.
#ifndef GRANARY_COMMON_HISTORY_LOG_H_
#define GRANARY_COMMON_HISTORY_LOG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace granary {

// The environment variable naming the process-global log's file.
inline constexpr char kHistoryEnvironmentVariable[] = "GRANARY_HISTORY";

class HistoryLog {
 public:
  // Opens (creating it, appending if it exists) the history file `path`; lines name
  // `process`. Errors: the open's, naming the path.
  static absl::StatusOr<std::unique_ptr<HistoryLog>> Open(const std::string& path,
                                                          std::string process);
  ~HistoryLog();
  HistoryLog(const HistoryLog&) = delete;
  HistoryLog& operator=(const HistoryLog&) = delete;

  // The process-global log, opened at the first call from $GRANARY_HISTORY (its process name
  // is the file's name up to its first '.', e.g. "worker-0" of ".../worker-0.2.tsv"); nullptr
  // when the variable is unset or the file cannot be opened.
  // Inline: the disabled path is a load and a branch, no call.
  static HistoryLog* Global() {
    static HistoryLog* const global = OpenGlobal();
    return global;
  }

  // Appends one line: `op` and `phase` (invoke, ok, fail or info) are single words, `fields`
  // space-separated key=value pairs without tabs or newlines.
  void Record(absl::string_view op, absl::string_view phase, absl::string_view fields)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The logical time of the lines: CLOCK_MONOTONIC in nanoseconds, past libfaketime.
  static int64_t MonotonicNanos();

 private:
  HistoryLog(int fd, std::string process) : fd_(fd), process_(std::move(process)) {}
  // The log $GRANARY_HISTORY names; nullptr without one (an open failure is logged).
  static HistoryLog* OpenGlobal();

  const int fd_;
  const std::string process_;
  absl::Mutex mu_;
  int64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace granary

// Records op/phase with the fields absl::StrCat(...) makes, in the process-global log; without
// one, neither formats nor evaluates the fields. E.g.
//   GRANARY_HISTORY_RECORD("journal_commit", "ok", "seq=", seq, " crc=", crc);
#define GRANARY_HISTORY_RECORD(op, phase, ...)                                    \
  do {                                                                            \
    if (::granary::HistoryLog* granary_history = ::granary::HistoryLog::Global(); \
        granary_history != nullptr) {                                             \
      granary_history->Record(op, phase, ::absl::StrCat(__VA_ARGS__));            \
    }                                                                             \
  } while (false)

#endif  // GRANARY_COMMON_HISTORY_LOG_H_
