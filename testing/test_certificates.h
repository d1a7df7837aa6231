// TestCertificates: a CA and certificates made with the `openssl` tool at test time (issue 15:
// the tests do not trust the project's own CertificateAuthority to test the project). Each
// certificate names its identity as a URI SAN (security/peer_identity.h) and is valid for
// 127.0.0.1 and localhost, as a server and as a client.
#ifndef GRANARY_TESTING_TEST_CERTIFICATES_H_
#define GRANARY_TESTING_TEST_CERTIFICATES_H_

#include <string>

#include "security/transport_security.h"

namespace granary::testing {

class TestCertificates {
 public:
  // Makes <dir>/ca.crt and ca.key (the directory must exist). Check ok() before use.
  explicit TestCertificates(const std::string& dir);

  bool ok() const { return ok_; }
  const std::string& ca_file() const { return ca_file_; }

  // Issues <dir>/<name>.crt and .key for `identity_uri` signed by this CA; fails the test (and
  // returns files that do not exist) if openssl fails.
  TransportSecurity Issue(const std::string& name, const std::string& identity_uri) const;

 private:
  const std::string dir_;
  const std::string ca_file_;
  bool ok_ = false;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTING_TEST_CERTIFICATES_H_
