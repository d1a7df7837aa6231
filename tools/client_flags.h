// How a client command (`granary run`, `status`, `precache`) reaches the dispatcher: --dispatcher
// with the transport security flags (tls_flags.h) and --token_file, or a client configuration
// file (--config, granary/client_config.h) that gives what those flags do not.
#ifndef GRANARY_TOOLS_CLIENT_FLAGS_H_
#define GRANARY_TOOLS_CLIENT_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "granary/client.h"

ABSL_DECLARE_FLAG(std::string, dispatcher);
ABSL_DECLARE_FLAG(std::string, token_file);
ABSL_DECLARE_FLAG(std::string, config);

namespace granary {

// ClientOptions with the dispatcher's address, TLS files or --insecure, and the bearer token of
// --token_file (read through `env`) — each from its flag, else from --config — and errors naming
// the flags; the rest default. InvalidArgument without a dispatcher address; the errors of
// ApplyClientConfigFile.
absl::StatusOr<ClientOptions> ClientConnectionFromFlags(Env* env);

}  // namespace granary

#endif  // GRANARY_TOOLS_CLIENT_FLAGS_H_
