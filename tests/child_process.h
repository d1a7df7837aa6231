// ChildProcess: a real process started by a test (a granary server), with its stdout readable
// line by line and its stderr passed through. The destructor SIGKILLs and reaps a child that
// is still running, so a failing test never leaves processes behind.
#ifndef GRANARY_TESTS_CHILD_PROCESS_H_
#define GRANARY_TESTS_CHILD_PROCESS_H_

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace granary::testing {

class ChildProcess {
 public:
  // Starts argv[0] with the arguments argv[1..]; with `merge_stderr`, its stderr is read with
  // its stdout. pid() is -1 if the fork failed.
  explicit ChildProcess(const std::vector<std::string>& argv, bool merge_stderr = false) {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      if (merge_stderr) ::dup2(out[1], STDERR_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(out[1]);
    stdout_fd_ = out[0];
  }

  ~ChildProcess() {
    if (running()) {
      Kill(SIGKILL);
      Wait();
    }
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
  }

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !reaped_; }

  // The next line the child writes to stdout (without "\n"), or "" after `timeout` or EOF.
  std::string ReadLine(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const size_t newline = buffered_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffered_.substr(0, newline);
        buffered_.erase(0, newline + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "";
      pollfd p{stdout_fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char buf[4096];
      const ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
      if (n <= 0) return "";
      buffered_.append(buf, n);
    }
  }

  void Kill(int signal) {
    if (running()) ::kill(pid_, signal);
  }

  // Reaps the child; returns its exit code, or 128 + the signal that ended it.
  int Wait() {
    if (!running()) return exit_code_;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
  std::string buffered_;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTS_CHILD_PROCESS_H_
