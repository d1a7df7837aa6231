// Running a shell command line for tests: its exit code and its combined output. A thin layer
// over common/subprocess.h (the one way Granary starts processes).
#ifndef GRANARY_TESTS_RUN_COMMAND_H_
#define GRANARY_TESTS_RUN_COMMAND_H_

#include <chrono>
#include <string>

#include "common/subprocess.h"

namespace granary::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved.
};

// Runs `command` through /bin/sh and waits for it (at most 2 minutes for its output).
inline CommandResult RunCommand(const std::string& command) {
  Subprocess process({"/bin/sh", "-c", command}, Subprocess::Stderr::kMergeIntoStdout);
  CommandResult result;
  result.output = process.ReadAll(std::chrono::minutes(2));
  result.exit_code = process.Wait();
  return result;
}

}  // namespace granary::testing

#endif  // GRANARY_TESTS_RUN_COMMAND_H_
