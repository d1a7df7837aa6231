#include "client/client_security.h"

#include "absl/strings/str_cat.h"

namespace granary {

const ClientOptionNames& ClientOptionNamesFor(ClientOptionNaming naming) {
  static const ClientOptionNames* const fields =
      new ClientOptionNames{.dispatcher_address = "ClientOptions.dispatcher_address",
                            .bearer_token = "ClientOptions.bearer_token",
                            .security = {.cert = "ClientOptions.tls_cert_file",
                                         .key = "ClientOptions.tls_key_file",
                                         .ca = "ClientOptions.tls_ca_file",
                                         .insecure = "ClientOptions.insecure"}};
  // SecuritySettingNames' defaults are the flags.
  static const ClientOptionNames* const flags =
      new ClientOptionNames{.dispatcher_address = "--dispatcher", .bearer_token = "--token_file"};
  static const ClientOptionNames* const python = new ClientOptionNames{
      .dispatcher_address = "address",
      .bearer_token = "token",
      .security = {
          .cert = "tls_cert", .key = "tls_key", .ca = "tls_ca", .insecure = "insecure=True"}};
  switch (naming) {
    case ClientOptionNaming::kFlags:
      return *flags;
    case ClientOptionNaming::kPythonKeywords:
      return *python;
    case ClientOptionNaming::kFields:
      break;
  }
  return *fields;
}

TransportSecurity ClientTransportSecurity(const ClientOptions& options) {
  TransportSecurity security;
  security.ca_file = options.tls_ca_file;
  security.cert_file = options.tls_cert_file;
  security.key_file = options.tls_key_file;
  security.insecure = options.insecure;
  security.names = ClientOptionNamesFor(options.option_naming).security;
  return security;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientChannelCredentials(
    const ClientOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFor(ClientTransportSecurity(options));
  if (!credentials.ok() || options.bearer_token.empty()) return credentials;
  if (options.insecure) {
    const ClientOptionNames& names = ClientOptionNamesFor(options.option_naming);
    return absl::InvalidArgumentError(absl::StrCat(
        names.bearer_token, " is never sent in plain text (", names.security.insecure, ")"));
  }
  return grpc::CompositeChannelCredentials(*credentials,
                                           grpc::AccessTokenCredentials(options.bearer_token));
}

}  // namespace granary
