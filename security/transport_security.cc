#include "security/transport_security.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace granary {
namespace {

absl::Status CheckChoice(const TransportSecurity& security) {
  const SecuritySettingNames& names = security.names;
  const bool any_file =
      !security.cert_file.empty() || !security.key_file.empty() || !security.ca_file.empty();
  if (security.insecure && any_file) {
    return absl::InvalidArgumentError(
        absl::StrCat(names.insecure, " and TLS files were both given: choose one"));
  }
  if (!security.insecure && !any_file) {
    return absl::InvalidArgumentError(
        absl::StrCat("no transport security chosen: give ", names.cert, ", ", names.key, " and ",
                     names.ca, " (see SECURITY.md), or ", names.insecure, " for plain text"));
  }
  if (security.cert_file.empty() != security.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(names.cert, " and ", names.key, " go together: give both"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPem(const std::string& name, const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(name, " is required for TLS"));
  absl::StatusOr<std::string> pem = ReadFileToString(Env::Default(), path);
  if (!pem.ok()) return Annotate(pem.status(), name);
  if (!absl::StrContains(*pem, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(name, " '", path, "' is not a PEM file"));
  }
  return pem;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const TransportSecurity& security) {
  RETURN_IF_ERROR(CheckChoice(security));
  if (security.insecure) return grpc::InsecureServerCredentials();
  const SecuritySettingNames& names = security.names;
  if (security.cert_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a TLS server needs its certificate: give ", names.cert, " and ", names.key));
  }
  grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(names.ca, security.ca_file));
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(names.cert, security.cert_file));
  ASSIGN_OR_RETURN(pair.private_key, ReadPem(names.key, security.key_file));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const TransportSecurity& security) {
  RETURN_IF_ERROR(CheckChoice(security));
  if (security.insecure) return grpc::InsecureChannelCredentials();
  const SecuritySettingNames& names = security.names;
  grpc::SslCredentialsOptions options;
  ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(names.ca, security.ca_file));
  if (!security.cert_file.empty()) {
    ASSIGN_OR_RETURN(options.pem_cert_chain, ReadPem(names.cert, security.cert_file));
    ASSIGN_OR_RETURN(options.pem_private_key, ReadPem(names.key, security.key_file));
  }
  return grpc::SslCredentials(options);
}

std::vector<std::string> TransportSecurityFlags(const TransportSecurity& security) {
  if (security.insecure) return {"--insecure"};
  std::vector<std::string> flags;
  if (!security.cert_file.empty()) {
    flags = {"--tls_cert=" + security.cert_file, "--tls_key=" + security.key_file};
  }
  flags.push_back("--tls_ca=" + security.ca_file);
  return flags;
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || absl::StartsWith(host, "127.");
}

std::string PlaintextWarning(const TransportSecurity& security, const std::string& host) {
  if (!security.insecure || IsLoopbackHost(host)) return "";
  return absl::StrCat("WARNING: serving plain text (--insecure) on ", host,
                      ", reachable from other hosts: anyone who reaches this port can read and "
                      "forge everything it serves. Use TLS (SECURITY.md).");
}

}  // namespace granary
