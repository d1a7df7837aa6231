#include "dispatcher/provisioner.h"

#include <signal.h>

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "glog/logging.h"

namespace granary {
namespace {

class CommandProvisioner final : public Provisioner {
 public:
  CommandProvisioner(std::string command_template, std::chrono::milliseconds timeout)
      : template_(std::move(command_template)), timeout_(timeout) {}

  absl::Status Resize(int32_t count, const std::vector<std::string>& idle) override {
    const std::string command = absl::StrReplaceAll(template_, {{"{n}", absl::StrCat(count)}});
    Subprocess shell({"/bin/sh", "-c", command}, Subprocess::Stderr::kMergeIntoStdout);
    if (shell.pid() < 0) {
      return absl::InternalError(absl::StrCat("provision command '", command, "': cannot fork"));
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    const std::string output = shell.ReadAll(timeout_);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (shell.WaitFor(std::max(left, std::chrono::milliseconds(0))) < 0) {
      shell.Kill(SIGKILL);
      shell.Wait();
      return absl::DeadlineExceededError(absl::StrCat("provision command '", command,
                                                      "' did not finish within ", timeout_.count(),
                                                      " ms (killed)"));
    }
    if (shell.Wait() != 0) {
      constexpr size_t kTail = 512;
      const std::string tail = std::string(absl::StripTrailingAsciiWhitespace(
          output.size() > kTail ? output.substr(output.size() - kTail) : output));
      return absl::FailedPreconditionError(
          absl::StrCat("provision command '", command, "' ", shell.ExitDescription(),
                       tail.empty() ? "" : absl::StrCat(": ", tail)));
    }
    LOG(INFO) << "provision command '" << command << "' asked for " << count << " workers";
    return absl::OkStatus();
  }

  std::string Describe() const override { return absl::StrCat("command '", template_, "'"); }

 private:
  const std::string template_;
  const std::chrono::milliseconds timeout_;
};

class LocalProvisioner final : public Provisioner {
 public:
  explicit LocalProvisioner(LocalProvisionerOptions options) : options_(std::move(options)) {}

  absl::Status Resize(int32_t count, const std::vector<std::string>& idle) override {
    // Forget the ones that died (reaping them).
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (it->second->WaitFor(std::chrono::milliseconds(0)) >= 0) {
        LOG(WARNING) << "local provisioner: worker " << it->first << " "
                     << it->second->ExitDescription();
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
    count = std::clamp(count, 0, options_.max_workers);
    for (int32_t k = 0; static_cast<int32_t>(workers_.size()) < count && k < options_.max_workers;
         ++k) {
      const std::string id = absl::StrCat(options_.id_prefix, k);
      if (workers_.count(id) > 0) continue;
      RETURN_IF_ERROR(Start(id));
    }
    // Stop idle workers of its own, the newest ids first.
    for (auto it = idle.rbegin();
         it != idle.rend() && static_cast<int32_t>(workers_.size()) > count; ++it) {
      auto worker = workers_.find(*it);
      if (worker == workers_.end()) continue;
      worker->second->Kill(SIGTERM);
      if (worker->second->WaitFor(std::chrono::seconds(5)) < 0) worker->second->Kill(SIGKILL);
      LOG(INFO) << "local provisioner: stopped idle worker " << *it;
      workers_.erase(worker);
    }
    return absl::OkStatus();
  }

  std::string Describe() const override { return "local"; }

 private:
  absl::Status Start(const std::string& id) {
    std::vector<std::string> argv = {options_.binary,
                                     "worker",
                                     absl::StrCat("--dispatcher=", options_.dispatcher_address),
                                     absl::StrCat("--worker_id=", id),
                                     "--port=0",
                                     "--take_over_load"};
    for (const std::string& flag : options_.flags) {
      argv.push_back(absl::StrReplaceAll(flag, {{"{id}", id}}));
    }
    const std::string log =
        options_.log_dir.empty() ? "" : absl::StrCat(options_.log_dir, "/", id, ".log");
    auto process = std::make_unique<Subprocess>(
        argv, log.empty() ? Subprocess::Stderr::kInherit : Subprocess::Stderr::kToFile, log);
    const std::string address = process->ReadListenAddress(std::chrono::seconds(30));
    if (address.empty()) {
      process->Kill(SIGKILL);
      process->Wait();
      return absl::UnavailableError(absl::StrCat(
          "local provisioner: worker ", id, " (", options_.binary, ") did not start: it ",
          process->ExitDescription(), log.empty() ? "" : absl::StrCat("; see ", log)));
    }
    LOG(INFO) << "local provisioner: started worker " << id << " at " << address << " (pid "
              << process->pid() << ")";
    workers_.emplace(id, std::move(process));
    return absl::OkStatus();
  }

  const LocalProvisionerOptions options_;
  std::map<std::string, std::unique_ptr<Subprocess>> workers_;
};

}  // namespace

std::unique_ptr<Provisioner> NewCommandProvisioner(std::string command_template,
                                                   std::chrono::milliseconds timeout) {
  return std::make_unique<CommandProvisioner>(std::move(command_template), timeout);
}

std::unique_ptr<Provisioner> NewLocalProvisioner(LocalProvisionerOptions options) {
  return std::make_unique<LocalProvisioner>(std::move(options));
}

}  // namespace granary
