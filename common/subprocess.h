// Subprocess: a child process whose stdout is read line by line (servers print the address
// they listen on), with its stderr passed through, merged into stdout, or sent to a log file.
// The destructor SIGKILLs and reaps a child that is still running, so neither a failing test
// nor `granary cluster` leaves processes behind; and the kernel SIGKILLs a child whose starting
// thread dies first (PR_SET_PDEATHSIG), so not even a killed parent does. Thread-compatible.
#ifndef GRANARY_COMMON_SUBPROCESS_H_
#define GRANARY_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace granary {

// Granary's servers announce the address they serve on as their first line of stdout:
// "granary <what> listening on HOST:PORT". ReadListenAddress reads it back.
inline constexpr char kListeningOn[] = " listening on ";

class Subprocess {
 public:
  enum class Stderr { kInherit, kMergeIntoStdout, kToFile };
  // The exit code of a child that could not join its network namespace.
  static constexpr int kSetnsFailedExitCode = 126;

  // Starts argv[0] (a path) with arguments argv[1..], in this process's environment plus the
  // "NAME=value" entries of `environment` (which win). With Stderr::kToFile, stderr is appended
  // to `stderr_path`. With a `network_namespace` (a path such as /run/netns/NAME, opened before
  // the fork), the child joins that network namespace before exec (setns; needs
  // CAP_SYS_ADMIN); if it cannot, it writes why to its stderr and exits with code
  // kSetnsFailedExitCode. pid() is -1 if the process could not be started (also when the
  // namespace cannot be opened).
  explicit Subprocess(const std::vector<std::string>& argv, Stderr stderr_mode = Stderr::kInherit,
                      const std::string& stderr_path = "",
                      const std::vector<std::string>& environment = {},
                      const std::string& network_namespace = "");
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !reaped_; }

  // The next line the child writes to stdout (without "\n"), or "" after `timeout` or at EOF.
  // A zero timeout returns a line only if it is already there (never blocks).
  std::string ReadLine(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // HOST:PORT from the next stdout line if it is a server's announcement (kListeningOn), else "".
  std::string ReadListenAddress(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Everything the child writes to stdout until it closes it (or `timeout`).
  std::string ReadAll(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  void Kill(int signal);
  // Reaps the child; returns its exit code, or 128 + the signal that ended it.
  int Wait();
  // SIGSTOPs the child and returns once all its threads have stopped (kill() alone returns
  // while some may still run). If the child ends meanwhile, it is reaped as by Wait.
  void Pause();
  // Like Wait, but gives up after `timeout` and returns -1 if the child still runs.
  int WaitFor(std::chrono::milliseconds timeout);
  // Once reaped: how the child ended, "exited with code N" or "was killed by signal N (NAME)";
  // "is running" before.
  std::string ExitDescription() const;

 private:
  // Records how the child ended from its waitpid status.
  void Reaped(int status);

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
  int wait_status_ = 0;  // waitpid's, once reaped
  std::string buffered_;
};

// How a child ended, from its waitpid status: "exited with code N" or "was killed by signal N
// (SIGNAME)".
std::string DescribeWaitStatus(int status);

// The path of the running executable (/proc/self/exe resolved).
std::string SelfExecutablePath();

}  // namespace granary

#endif  // GRANARY_COMMON_SUBPROCESS_H_
