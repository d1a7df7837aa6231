// Flags and process plumbing shared by the server commands (dispatcher, worker).
#ifndef GRANARY_TOOLS_SERVER_FLAGS_H_
#define GRANARY_TOOLS_SERVER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "cache/redis_connection.h"
#include "security/data_roots.h"
#include "security/transport_security.h"

ABSL_DECLARE_FLAG(std::string, host);
ABSL_DECLARE_FLAG(int, port);
ABSL_DECLARE_FLAG(std::vector<std::string>, data_roots);
ABSL_DECLARE_FLAG(int32_t, max_message_bytes);
ABSL_DECLARE_FLAG(std::string, redis_user);
ABSL_DECLARE_FLAG(std::string, redis_password_file);

namespace granary {

// "host:port" from --host and --port.
std::string ListenAddress();

// The DataRoots of --data_roots (none when it is empty: every file source is refused).
// InvalidArgument naming a root that is not an existing directory.
absl::StatusOr<DataRoots> DataRootsFromFlags();

// What the Redis cache tier (redis://… cache roots) authenticates with: --redis_user and the
// password in --redis_password_file (its content up to a trailing newline). None without
// --redis_password_file. Errors name the flag, never the password: InvalidArgument for
// --redis_user without --redis_password_file, or an empty file; the read's error otherwise.
absl::StatusOr<RedisCredentials> RedisCredentialsFromFlags();
// --redis_user and --redis_password_file as given to this process, to pass them on to the
// dispatcher and workers it starts (`granary cluster`).
std::vector<std::string> RedisCredentialFlags();

// --max_message_bytes: the largest request a server accepts (gRPC refuses a larger one with
// ResourceExhausted "Received message larger than max (<size> vs. <limit>)").
int MaxMessageBytes();

// Prints PlaintextWarning (transport_security.h) for --host to stderr, if there is one.
void WarnIfPlaintextOnNetwork(const TransportSecurity& security);

// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts afterwards. Call
// first thing in main-like functions, before any thread exists.
void BlockTerminationSignals();
// Waits for SIGINT or SIGTERM (blocked by BlockTerminationSignals) and returns it.
int WaitForTerminationSignal();

}  // namespace granary

#endif  // GRANARY_TOOLS_SERVER_FLAGS_H_
