// Client configuration files: how a client reaches a Granary cluster — the dispatcher's
// address, the TLS files or plain text, a token file — in one file that `granary cluster`
// writes (<dir>/client.json) and every client reads: `granary run`, `status` and `precache`
// with --config, granary.connect(config=...) in Python, a C++ trainer through
// ApplyClientConfigFile. The format is ClientConfig (proto/client.proto) in protobuf's JSON
// mapping; client/FORMAT.md describes it.
#ifndef GRANARY_CLIENT_INCLUDE_GRANARY_CLIENT_CONFIG_H_
#define GRANARY_CLIENT_INCLUDE_GRANARY_CLIENT_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "granary/client.h"

namespace granary {

// Fills in `options` what the configuration file at `path` gives and `options` leaves unset,
// so that settings given explicitly override the file's:
//  * dispatcher_address, when empty;
//  * unless options.insecure: each of tls_ca_file, tls_cert_file and tls_key_file that is
//    empty, and bearer_token (read from the file's token_file, whitespace stripped) when empty;
//  * insecure, when options gives no TLS file and no token.
// Errors name the file and the field: NotFound / PermissionDenied when the file or a file it
// names cannot be read; InvalidArgument when it is not a ClientConfig in JSON (an unknown field,
// a wrong type), or sets insecure with TLS files or a token.
absl::Status ApplyClientConfigFile(const std::string& path, ClientOptions* options);

}  // namespace granary

#endif  // GRANARY_CLIENT_INCLUDE_GRANARY_CLIENT_CONFIG_H_
