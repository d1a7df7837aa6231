#include "tools/client_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "common/status_macros.h"
#include "tools/tls_flags.h"

ABSL_FLAG(std::string, token_file, "",
          "A file holding this client's bearer token (instead of a client certificate; needs "
          "--tls_ca).");

namespace granary {

absl::StatusOr<ClientOptions> ClientConnectionFromFlags(Env* env) {
  ClientOptions options;
  options.dispatcher_address = absl::GetFlag(FLAGS_dispatcher);
  if (options.dispatcher_address.empty()) {
    return absl::InvalidArgumentError("--dispatcher is required");
  }
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
  return options;
}

}  // namespace granary
