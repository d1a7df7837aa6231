#include "client/local_workers.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <future>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"

namespace granary {
namespace {

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "host";
  return name;
}

}  // namespace

absl::StatusOr<std::string> LocalWorkersBinary(const std::string& configured) {
  std::vector<std::string> candidates;
  if (!configured.empty()) {
    candidates.push_back(configured);
  } else {
    if (const char* env = std::getenv("GRANARY_BINARY"); env != nullptr && *env != '\0') {
      candidates.push_back(env);
    }
    const std::string self = SelfExecutablePath();
    if (self.size() >= 8 && self.substr(self.size() - 8) == "/granary") candidates.push_back(self);
    if (const char* path = std::getenv("PATH"); path != nullptr) {
      for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
        candidates.push_back(absl::StrCat(dir, "/granary"));
      }
    }
  }
  for (const std::string& c : candidates) {
    if (Executable(c)) return c;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("local workers need the granary executable: ",
                   configured.empty() ? "none found in $GRANARY_BINARY, this process or $PATH"
                                      : absl::StrCat(configured, " is not executable"),
                   "; set ClientOptions.granary_binary (or GRANARY_BINARY)"));
}

absl::StatusOr<std::unique_ptr<LocalWorkers>> LocalWorkers::Start(
    const LocalWorkersOptions& options) {
  if (!Executable(options.binary)) {
    return absl::FailedPreconditionError(
        absl::StrCat("local workers: ", options.binary, " is not an executable"));
  }
  std::unique_ptr<LocalWorkers> workers(new LocalWorkers());
  std::promise<absl::Status> started;
  std::future<absl::Status> status = started.get_future();
  LocalWorkers* self = workers.get();
  workers->owner_ = std::thread([options, self, started = std::move(started)]() mutable {
    std::vector<std::unique_ptr<Subprocess>> processes;
    absl::Status result;
    for (int32_t i = 0; i < options.count && result.ok(); ++i) {
      const std::string id = absl::StrCat("local-", HostName(), "-", ::getpid(), "-j",
                                          options.job_id, "c", options.consumer, "-", i);
      std::vector<std::string> argv = {
          options.binary,
          "worker",
          absl::StrCat("--dispatcher=", options.dispatcher_address),
          absl::StrCat("--worker_id=", id),
          "--host=127.0.0.1",
          "--port=0",
          absl::StrCat("--local_to=", options.job_id, "/", options.consumer)};
      argv.insert(argv.end(), options.flags.begin(), options.flags.end());
      const std::string log =
          options.log_dir.empty() ? "" : absl::StrCat(options.log_dir, "/", id, ".log");
      processes.push_back(std::make_unique<Subprocess>(
          argv, log.empty() ? Subprocess::Stderr::kInherit : Subprocess::Stderr::kToFile, log));
      const std::string address = processes.back()->ReadListenAddress(std::chrono::seconds(30));
      if (address.empty()) {
        processes.back()->Kill(SIGKILL);
        processes.back()->Wait();
        result = absl::UnavailableError(absl::StrCat(
            "local worker ", id, " (", options.binary, ") did not start: it ",
            processes.back()->ExitDescription(), log.empty() ? "" : absl::StrCat("; see ", log)));
        break;
      }
      self->ids_.push_back(id);
      self->addresses_.push_back(address);
      self->pids_.push_back(processes.back()->pid());
    }
    started.set_value(result);
    if (result.ok()) self->stop_.WaitForNotification();
    processes.clear();  // SIGKILLs and reaps them
  });
  if (absl::Status result = status.get(); !result.ok()) return result;  // ~LocalWorkers joins
  return workers;
}

LocalWorkers::~LocalWorkers() {
  stop_.Notify();
  if (owner_.joinable()) owner_.join();
}

}  // namespace granary
