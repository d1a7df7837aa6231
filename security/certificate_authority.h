// CertificateAuthority: a throwaway CA that issues the certificates of a local cluster — what
// `granary cluster` and `granary chaos` use so that TLS is on by default with nothing to set up
// (SECURITY.md). For a real cluster, certificates come from the cluster's own CA (e.g.
// cert-manager on Kubernetes) with the same subject alternative names.
//
// Keys are ECDSA P-256, certificates valid for 30 days from an hour ago, signed with SHA-256.
// An issued certificate names its identity (peer_identity.h) as a URI SAN and is valid for
// 127.0.0.1, ::1, localhost and the given host names, as a server and as a client.
#ifndef GRANARY_SECURITY_CERTIFICATE_AUTHORITY_H_
#define GRANARY_SECURITY_CERTIFICATE_AUTHORITY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "security/transport_security.h"

namespace granary {

class CertificateAuthority {
 public:
  // Creates a CA in `dir` (ca.crt, ca.key; the directory is created, keys are mode 0600).
  // Internal errors name the OpenSSL call that failed.
  static absl::StatusOr<std::unique_ptr<CertificateAuthority>> Create(const std::string& dir);
  ~CertificateAuthority();

  // Issues <dir>/<name>.crt and <dir>/<name>.key for `identity_uri` (e.g. WorkerIdentityUri),
  // valid for the loopback names and `hosts`; returns the TransportSecurity that uses them
  // with this CA.
  absl::StatusOr<TransportSecurity> Issue(const std::string& name, const std::string& identity_uri,
                                          const std::vector<std::string>& hosts = {});

  const std::string& ca_file() const { return ca_file_; }

 private:
  struct Key;
  CertificateAuthority(std::string dir, std::unique_ptr<Key> key);

  const std::string dir_;
  const std::string ca_file_;
  std::unique_ptr<Key> key_;  // the CA's private key and certificate
};

// What a process of a local cluster (`granary cluster`, `granary chaos`) is started with: the
// certificate `ca` issues for it (CertificateAuthority::Issue), or plain text when `ca` is null.
absl::StatusOr<TransportSecurity> LocalSecurityFor(CertificateAuthority* ca,
                                                   const std::string& name,
                                                   const std::string& identity_uri,
                                                   const std::vector<std::string>& hosts = {});

}  // namespace granary

#endif  // GRANARY_SECURITY_CERTIFICATE_AUTHORITY_H_
