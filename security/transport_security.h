// TransportSecurity: how a process's gRPC connections are secured (SECURITY.md) — TLS with a
// certificate, its key and the cluster's CA, or plain text only when asked for explicitly.
//
// Servers (dispatcher, worker) present their certificate and verify a client certificate when
// one is offered, against the CA (mutual TLS: workers must offer one, see peer_identity.h;
// clients may authenticate otherwise). Channels verify the server against the CA and offer
// their own certificate when they have one.
#ifndef GRANARY_SECURITY_TRANSPORT_SECURITY_H_
#define GRANARY_SECURITY_TRANSPORT_SECURITY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace granary {

// What the settings of a TransportSecurity are called where its user gave them, for the errors
// that name them: the command-line flags (the default), or a library's option names (the
// client library's ClientOptions fields, granary.connect's keywords).
struct SecuritySettingNames {
  std::string cert = "--tls_cert";
  std::string key = "--tls_key";
  std::string ca = "--tls_ca";
  std::string insecure = "--insecure";
};

struct TransportSecurity {
  // PEM files: this process's certificate (chain) and private key, and the CA certificate(s)
  // peers are verified against.
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  // Plain text: no encryption and no peer authentication. Must be asked for; exclusive with
  // the files.
  bool insecure = false;
  SecuritySettingNames names;

  bool tls() const { return !insecure; }
};

// Server credentials: TLS needs cert_file, key_file and ca_file. InvalidArgument naming the
// settings (security.names) when neither TLS files nor `insecure` are given (or both), or a file is missing;
// NotFound/PermissionDenied naming a file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const TransportSecurity& security);

// Channel credentials: TLS needs ca_file; cert_file and key_file are offered when given (both
// or neither). Errors as ServerCredentialsFor.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const TransportSecurity& security);

// The command-line flags that give `security` to a Granary process: "--insecure", or
// --tls_cert, --tls_key (when given) and --tls_ca.
std::vector<std::string> TransportSecurityFlags(const TransportSecurity& security);

// Whether `host` (as given to --host) is a loopback address: "localhost", 127.0.0.0/8, "::1".
bool IsLoopbackHost(const std::string& host);

// The warning a plain-text server binding `host` prints when `host` is not loopback; "" when
// there is nothing to warn about.
std::string PlaintextWarning(const TransportSecurity& security, const std::string& host);

}  // namespace granary

#endif  // GRANARY_SECURITY_TRANSPORT_SECURITY_H_
