#include "testing/test_certificates.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace granary::testing {
namespace {

constexpr char kOpenSsl[] = "/usr/bin/openssl";

// Runs openssl with `args`; false (and a test failure showing its output) if it fails.
bool OpenSsl(std::vector<std::string> args) {
  args.insert(args.begin(), kOpenSsl);
  Subprocess openssl(args, Subprocess::Stderr::kMergeIntoStdout);
  const std::string output = openssl.ReadAll();
  const int code = openssl.Wait();
  EXPECT_EQ(code, 0) << "openssl " << args[1] << ": " << output;
  return code == 0;
}

}  // namespace

TestCertificates::TestCertificates(const std::string& dir) : dir_(dir), ca_file_(dir + "/ca.crt") {
  ok_ = OpenSsl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", dir_ + "/ca.key", "-out", ca_file_, "-days", "2", "-subj",
                 "/CN=granary test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                 "keyUsage=critical,keyCertSign,cRLSign"});
}

TransportSecurity TestCertificates::Issue(const std::string& name,
                                          const std::string& identity_uri) const {
  const std::string prefix = dir_ + "/" + name;
  const std::string extensions = absl::StrCat(
      "basicConstraints=CA:FALSE\n"
      "extendedKeyUsage=serverAuth,clientAuth\n"
      "subjectAltName=URI:",
      identity_uri, ",IP:127.0.0.1,DNS:localhost\n");
  EXPECT_TRUE(WriteStringToFile(Env::Default(), prefix + ".ext", extensions, false).ok());
  OpenSsl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", prefix + ".key", "-out", prefix + ".csr", "-subj", "/CN=" + name}) &&
      OpenSsl({"x509", "-req", "-in", prefix + ".csr", "-CA", ca_file_, "-CAkey", dir_ + "/ca.key",
               "-CAcreateserial", "-out", prefix + ".crt", "-days", "2", "-extfile",
               prefix + ".ext"});
  TransportSecurity security;
  security.cert_file = prefix + ".crt";
  security.key_file = prefix + ".key";
  security.ca_file = ca_file_;
  return security;
}

}  // namespace granary::testing
