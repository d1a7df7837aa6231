#include "tools/client_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "common/status_macros.h"
#include "granary/client_config.h"
#include "tools/tls_flags.h"

ABSL_FLAG(std::string, token_file, "",
          "A file holding this client's bearer token (instead of a client certificate; needs "
          "--tls_ca).");
ABSL_FLAG(std::string, config, "",
          "A client configuration file (JSON; `granary cluster` writes <dir>/client.json): the "
          "dispatcher, TLS files and token file. Flags given explicitly override it.");

namespace granary {

absl::StatusOr<ClientOptions> ClientConnectionFromFlags(Env* env) {
  ClientOptions options;
  options.option_naming = ClientOptionNaming::kFlags;
  options.dispatcher_address = absl::GetFlag(FLAGS_dispatcher);
  const TransportSecurity security = TransportSecurityFromFlags();
  options.tls_ca_file = security.ca_file;
  options.tls_cert_file = security.cert_file;
  options.tls_key_file = security.key_file;
  options.insecure = security.insecure;
  if (!absl::GetFlag(FLAGS_token_file).empty()) {
    absl::StatusOr<std::string> token = ReadFileToString(env, absl::GetFlag(FLAGS_token_file));
    if (!token.ok()) return Annotate(token.status(), "--token_file");
    options.bearer_token = std::string(absl::StripAsciiWhitespace(*token));
  }
  if (!absl::GetFlag(FLAGS_config).empty()) {
    RETURN_IF_ERROR(ApplyClientConfigFile(absl::GetFlag(FLAGS_config), &options));
  }
  if (options.dispatcher_address.empty()) {
    return absl::InvalidArgumentError("--dispatcher (or --config) is required");
  }
  return options;
}

}  // namespace granary
