#include "obs/structured_log.h"

#include <cstdio>
#include <ctime>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

namespace granary {
namespace {

thread_local int64_t current_job = 0;
thread_local int64_t current_task = 0;

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string Rfc3339(int64_t time_us) {
  const std::time_t seconds = static_cast<std::time_t>(time_us / 1000000);
  std::tm utc;
  gmtime_r(&seconds, &utc);
  return absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                         utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                         static_cast<int>(time_us % 1000000));
}

constexpr const char* kLevels[] = {"INFO", "WARNING", "ERROR", "FATAL"};

class StructuredLogSink : public google::LogSink {
 public:
  StructuredLogSink(bool json, LogIdentity identity)
      : json_(json), identity_(std::move(identity)) {}

  void send(google::LogSeverity severity, const char* full_filename, const char* base_filename,
            int line, const google::LogMessageTime& time, const char* message,
            size_t message_len) override {
    const std::string text =
        FormatLogLine(json_, identity_, severity, int64_t{time.timestamp()} * 1000000 + time.usec(),
                      absl::StrCat(base_filename, ":", line), current_job, current_task,
                      std::string(message, message_len));
    absl::MutexLock lock(&mu_);
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  }

 private:
  const bool json_;
  const LogIdentity identity_;
  absl::Mutex mu_;
};

}  // namespace

std::string FormatLogLine(bool json, const LogIdentity& identity, int severity, int64_t time_us,
                          const std::string& source, int64_t job, int64_t task,
                          const std::string& message) {
  const char* level = kLevels[severity < 0 ? 0 : severity > 3 ? 3 : severity];
  if (json) {
    std::string line = absl::StrCat("{\"ts\":\"", Rfc3339(time_us), "\",\"level\":\"", level,
                                    "\",\"component\":", JsonString(identity.component));
    if (!identity.worker_id.empty()) {
      absl::StrAppend(&line, ",\"worker\":", JsonString(identity.worker_id));
    }
    if (job != 0) absl::StrAppend(&line, ",\"job\":", job);
    if (task != 0) absl::StrAppend(&line, ",\"task\":", task);
    absl::StrAppend(&line, ",\"src\":", JsonString(source), ",\"msg\":", JsonString(message),
                    "}\n");
    return line;
  }
  std::string line =
      absl::StrCat(std::string(1, level[0]), Rfc3339(time_us), " ", identity.component);
  if (!identity.worker_id.empty()) absl::StrAppend(&line, " worker=", identity.worker_id);
  if (job != 0) absl::StrAppend(&line, " job=", job);
  if (task != 0) absl::StrAppend(&line, " task=", task);
  absl::StrAppend(&line, " ", source, "] ", message, "\n");
  return line;
}

absl::Status InstallStructuredLog(const std::string& format, LogIdentity identity) {
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_format '", format, "': expected text or json"));
  }
  // Process-lifetime: glog keeps a pointer until the process ends.
  static StructuredLogSink* sink = nullptr;
  if (sink != nullptr) return absl::FailedPreconditionError("structured log installed twice");
  sink = new StructuredLogSink(format == "json", std::move(identity));
  google::AddLogSink(sink);
  // The sink writes every line; glog itself writes none (no stderr copy, no log files).
  FLAGS_logtostderr = false;
  FLAGS_alsologtostderr = false;
  FLAGS_stderrthreshold = google::NUM_SEVERITIES;
  for (int s = 0; s < google::NUM_SEVERITIES; ++s) google::SetLogDestination(s, "");
  return absl::OkStatus();
}

ScopedLogContext::ScopedLogContext(int64_t job, int64_t task)
    : previous_job_(current_job), previous_task_(current_task) {
  current_job = job;
  current_task = task;
}

std::pair<int64_t, int64_t> ScopedLogContext::Current() { return {current_job, current_task}; }

ScopedLogContext::~ScopedLogContext() {
  current_job = previous_job_;
  current_task = previous_task_;
}

}  // namespace granary
