#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <thread>

namespace granary {

Subprocess::Subprocess(const std::vector<std::string>& argv, Stderr stderr_mode,
                       const std::string& stderr_path, const std::vector<std::string>& environment,
                       const std::string& network_namespace) {
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('=') + 1);  // "NAME="
    bool overridden = false;
    for (const std::string& o : environment) overridden = overridden || o.rfind(name, 0) == 0;
    if (!overridden) env.push_back(*e);
  }
  for (const std::string& o : environment) env.push_back(const_cast<char*>(o.c_str()));
  env.push_back(nullptr);
  const pid_t parent = ::getpid();
  int netns = -1;
  const std::string setns_failed =
      "granary: cannot join the network namespace " + network_namespace + " (setns)\n";
  if (!network_namespace.empty()) {
    netns = ::open(network_namespace.c_str(), O_RDONLY | O_CLOEXEC);
    if (netns < 0) return;
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    if (netns >= 0) ::close(netns);
    return;
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    // Die with the thread that started us; if the parent is already gone, do not run at all.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    // The child: only async-signal-safe calls until exec.
    ::dup2(out[1], STDOUT_FILENO);
    if (stderr_mode == Stderr::kMergeIntoStdout) ::dup2(out[1], STDERR_FILENO);
    if (stderr_mode == Stderr::kToFile) {
      const int fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) ::dup2(fd, STDERR_FILENO);
    }
    // Signals blocked by the parent (servers block SIGTERM to sigwait for it) stay blocked
    // across exec: unblock them.
    sigset_t all;
    sigfillset(&all);
    ::sigprocmask(SIG_UNBLOCK, &all, nullptr);
    if (netns >= 0 && ::setns(netns, CLONE_NEWNET) != 0) {
      [[maybe_unused]] const ssize_t written =
          ::write(STDERR_FILENO, setns_failed.data(), setns_failed.size());
      ::_exit(kSetnsFailedExitCode);
    }
    ::execve(args[0], args.data(), env.data());
    ::_exit(127);
  }
  if (netns >= 0) ::close(netns);
  ::close(out[1]);
  stdout_fd_ = out[0];
}

Subprocess::~Subprocess() {
  if (running()) {
    Kill(SIGKILL);
    Wait();
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

std::string Subprocess::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const size_t newline = buffered_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return line;
    }
    if (stdout_fd_ < 0) return "";
    // Past the deadline (or with a zero timeout) this still takes what is ready.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{stdout_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) <= 0) return "";
    char buf[4096];
    const ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) return "";
    buffered_.append(buf, n);
  }
}

std::string Subprocess::ReadListenAddress(std::chrono::milliseconds timeout) {
  const std::string line = ReadLine(timeout);
  const size_t at = line.rfind(kListeningOn);
  return at == std::string::npos ? "" : line.substr(at + sizeof(kListeningOn) - 1);
}

std::string Subprocess::ReadAll(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string out;
  out.swap(buffered_);
  while (stdout_fd_ >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{stdout_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[4096];
    const ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, n);
  }
  return out;
}

void Subprocess::Kill(int signal) {
  if (running()) ::kill(pid_, signal);
}

int Subprocess::Wait() {
  if (!running()) return exit_code_;
  int status = 0;
  ::waitpid(pid_, &status, 0);
  Reaped(status);
  return exit_code_;
}

void Subprocess::Pause() {
  if (!running()) return;
  ::kill(pid_, SIGSTOP);
  int status = 0;
  if (::waitpid(pid_, &status, WUNTRACED) == pid_ && !WIFSTOPPED(status)) Reaped(status);
}

void Subprocess::Reaped(int status) {
  reaped_ = true;
  wait_status_ = status;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Subprocess::ExitDescription() const {
  return reaped_ ? DescribeWaitStatus(wait_status_) : "is running";
}

std::string DescribeWaitStatus(int status) {
  if (!WIFSIGNALED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  const int signal = WTERMSIG(status);
  const char* name = ::sigabbrev_np(signal);
  return "was killed by signal " + std::to_string(signal) +
         (name != nullptr ? std::string(" (SIG") + name + ")" : std::string());
}

int Subprocess::WaitFor(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      Reaped(status);
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exit_code_;
}

std::string SelfExecutablePath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : std::string();
}

}  // namespace granary
