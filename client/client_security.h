// How a client secures its channels: the TLS files, plain text or bearer token of ClientOptions,
// and what those options are called where the user gave them (ClientOptionNaming) — one table,
// so that C++, the command line and Python each read their own names in the same errors.
// Internal to the client library (and the tools that reach a dispatcher).
#ifndef GRANARY_CLIENT_CLIENT_SECURITY_H_
#define GRANARY_CLIENT_CLIENT_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "granary/client.h"
#include "grpcpp/security/credentials.h"
#include "security/transport_security.h"

namespace granary {

struct ClientOptionNames {
  std::string dispatcher_address;
  std::string bearer_token;
  // tls_cert_file, tls_key_file, tls_ca_file, insecure.
  SecuritySettingNames security;
};

// The names under `naming`.
const ClientOptionNames& ClientOptionNamesFor(ClientOptionNaming naming);

// The transport security `options` asks for, named as options.option_naming says.
TransportSecurity ClientTransportSecurity(const ClientOptions& options);

// The credentials of every channel of a client with `options`: TLS or plain text
// (ChannelCredentialsFor), with the bearer token as call credentials. InvalidArgument naming the
// options (as options.option_naming says) for a bad choice, as ChannelCredentialsFor.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientChannelCredentials(
    const ClientOptions& options);

}  // namespace granary

#endif  // GRANARY_CLIENT_CLIENT_SECURITY_H_
