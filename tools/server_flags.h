// Flags and process plumbing shared by the server commands (dispatcher, worker).
#ifndef GRANARY_TOOLS_SERVER_FLAGS_H_
#define GRANARY_TOOLS_SERVER_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, host);
ABSL_DECLARE_FLAG(int, port);

namespace granary {

// "host:port" from --host and --port.
std::string ListenAddress();

// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts afterwards. Call
// first thing in main-like functions, before any thread exists.
void BlockTerminationSignals();
// Waits for SIGINT or SIGTERM (blocked by BlockTerminationSignals) and returns it.
int WaitForTerminationSignal();

}  // namespace granary

#endif  // GRANARY_TOOLS_SERVER_FLAGS_H_
