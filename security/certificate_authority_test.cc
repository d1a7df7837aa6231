// The throwaway CA's certificates checked by an independent implementation: the `openssl` tool.
#include "security/certificate_authority.h"

#include <sys/stat.h>

#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/peer_identity.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// The output of `openssl <args>` (stdout and stderr); the exit code in *code.
std::string OpenSsl(std::vector<std::string> args, int* code) {
  args.insert(args.begin(), "/usr/bin/openssl");
  Subprocess openssl(args, Subprocess::Stderr::kMergeIntoStdout);
  std::string output = openssl.ReadAll();
  *code = openssl.Wait();
  return output;
}

TEST(CertificateAuthorityTest, IssuesCertificatesOpenSslVerifiesWithTheirIdentity) {
  testing::ScopedTempDir dir;
  auto ca = CertificateAuthority::Create(dir.Join("tls"));
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto issued = (*ca)->Issue("worker-3", WorkerIdentityUri("worker-3"), {"node7.example"});
  ASSERT_TRUE(issued.ok()) << issued.status();
  EXPECT_EQ(issued->ca_file, dir.Join("tls/ca.crt"));

  int code = -1;
  const std::string verified =
      OpenSsl({"verify", "-CAfile", issued->ca_file, issued->cert_file}, &code);
  EXPECT_EQ(code, 0) << verified;
  EXPECT_THAT(verified, HasSubstr(": OK"));
  const std::string sans =
      OpenSsl({"x509", "-in", issued->cert_file, "-noout", "-ext", "subjectAltName"}, &code);
  EXPECT_EQ(code, 0) << sans;
  EXPECT_THAT(sans, HasSubstr("URI:granary://worker/worker-3"));
  EXPECT_THAT(sans, HasSubstr("IP Address:127.0.0.1"));
  EXPECT_THAT(sans, HasSubstr("DNS:node7.example"));
  const std::string usage =
      OpenSsl({"x509", "-in", issued->cert_file, "-noout", "-ext", "extendedKeyUsage"}, &code);
  EXPECT_THAT(usage, HasSubstr("TLS Web Server Authentication"));
  EXPECT_THAT(usage, HasSubstr("TLS Web Client Authentication"));
  // The key matches the certificate, and only its owner may read it.
  const std::string cert_key =
      OpenSsl({"x509", "-in", issued->cert_file, "-noout", "-pubkey"}, &code);
  const std::string key = OpenSsl({"pkey", "-in", issued->key_file, "-pubout"}, &code);
  EXPECT_EQ(cert_key, key);
  struct stat info;
  ASSERT_EQ(::stat(issued->key_file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

TEST(CertificateAuthorityTest, AnotherCaDoesNotVerify) {
  testing::ScopedTempDir dir;
  auto first = CertificateAuthority::Create(dir.Join("a"));
  auto second = CertificateAuthority::Create(dir.Join("b"));
  ASSERT_TRUE(first.ok() && second.ok());
  auto issued = (*second)->Issue("client", ClientIdentityUri("mallory"));
  ASSERT_TRUE(issued.ok()) << issued.status();
  int code = -1;
  const std::string output =
      OpenSsl({"verify", "-CAfile", (*first)->ca_file(), issued->cert_file}, &code);
  EXPECT_NE(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("unable to get local issuer certificate"));
}

}  // namespace
}  // namespace granary
