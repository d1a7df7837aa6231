// Running a command in a subprocess for tests: its exit code and its combined output.
#ifndef GRANARY_TESTS_SUBPROCESS_H_
#define GRANARY_TESTS_SUBPROCESS_H_

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace granary::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved.
};

// Runs `command` through /bin/sh and waits for it.
inline CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace granary::testing

#endif  // GRANARY_TESTS_SUBPROCESS_H_
