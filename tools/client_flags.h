// How a client command (`granary run`, `granary precache`) reaches the dispatcher: --dispatcher
// with the transport security flags (tls_flags.h) and --token_file.
#ifndef GRANARY_TOOLS_CLIENT_FLAGS_H_
#define GRANARY_TOOLS_CLIENT_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "granary/client.h"

ABSL_DECLARE_FLAG(std::string, dispatcher);
ABSL_DECLARE_FLAG(std::string, token_file);

namespace granary {

// ClientOptions with the dispatcher's address, TLS files or --insecure, and the bearer token of
// --token_file (read through `env`); the rest default. InvalidArgument without --dispatcher.
absl::StatusOr<ClientOptions> ClientConnectionFromFlags(Env* env);

}  // namespace granary

#endif  // GRANARY_TOOLS_CLIENT_FLAGS_H_
