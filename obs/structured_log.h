// Structured, leveled logs: every line of a `granary dispatcher`/`worker`/… process names its
// level, time, component, worker (when it is one) and the job and task the logging thread works
// for, in one of two formats (`--log_format`):
//   text: I2026-11-26T07:55:08.123456Z worker worker=w1 job=3 task=12 task_run.cc:59] message
//   json: {"ts":"2026-11-26T07:55:08.123456Z","level":"INFO","component":"worker",
//          "worker":"w1","job":3,"task":12,"src":"task_run.cc:59","msg":"message"}
// (one object per line, for log shippers; absent fields are left out). Both go to stderr.
// Implemented as a glog sink: the project's LOG() statements stay as they are.
#ifndef GRANARY_OBS_STRUCTURED_LOG_H_
#define GRANARY_OBS_STRUCTURED_LOG_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"

namespace granary {

struct LogIdentity {
  std::string component;  // "dispatcher", "worker", …
  std::string worker_id;  // empty unless a worker
};

// Routes every LOG() of the process through the structured format `format` ("text" or "json";
// InvalidArgument naming it otherwise). Call once, after flags are parsed and before threads
// log. Until then (and for commands that never call it) glog's own stderr format is used.
absl::Status InstallStructuredLog(const std::string& format, LogIdentity identity);

// While alive, the calling thread's log lines name `job` and `task` (0: none); restores the
// previous context when destroyed.
class ScopedLogContext {
 public:
  ScopedLogContext(int64_t job, int64_t task);
  ~ScopedLogContext();
  // The calling thread's (job, task).
  static std::pair<int64_t, int64_t> Current();
  ScopedLogContext(const ScopedLogContext&) = delete;
  ScopedLogContext& operator=(const ScopedLogContext&) = delete;

 private:
  int64_t previous_job_, previous_task_;
};

// The line `InstallStructuredLog(format, identity)` would write (exposed for tests). `time_us`:
// microseconds since the Unix epoch; `severity`: glog's (0 INFO … 3 FATAL).
std::string FormatLogLine(bool json, const LogIdentity& identity, int severity, int64_t time_us,
                          const std::string& source, int64_t job, int64_t task,
                          const std::string& message);

}  // namespace granary

#endif  // GRANARY_OBS_STRUCTURED_LOG_H_
