#include "security/transport_security.h"

#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "security/certificate_authority.h"
#include "security/peer_identity.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

TEST(TransportSecurityTest, PlainTextMustBeAskedFor) {
  const auto server = ServerCredentialsFor(TransportSecurity{});
  EXPECT_TRUE(absl::IsInvalidArgument(server.status()));
  EXPECT_THAT(
      server.status().message(),
      HasSubstr("give --tls_cert, --tls_key and --tls_ca (see SECURITY.md), or --insecure"));
  EXPECT_FALSE(ChannelCredentialsFor(TransportSecurity{}).ok());
  EXPECT_TRUE(ServerCredentialsFor(TransportSecurity{.insecure = true}).ok());
  EXPECT_TRUE(ChannelCredentialsFor(TransportSecurity{.insecure = true}).ok());
}

TEST(TransportSecurityTest, RefusesContradictoryOrIncompleteFlags) {
  EXPECT_THAT(ServerCredentialsFor({.ca_file = "ca.crt", .insecure = true}).status().message(),
              HasSubstr("--insecure and TLS files were both given"));
  EXPECT_THAT(ChannelCredentialsFor({.cert_file = "c.crt", .ca_file = "ca.crt"}).status().message(),
              HasSubstr("--tls_cert and --tls_key go together"));
  EXPECT_THAT(ServerCredentialsFor({.ca_file = "ca.crt"}).status().message(),
              HasSubstr("a TLS server needs its certificate: give --tls_cert and --tls_key"));
}

// Issue 30: a library names its own options (granary.connect's keywords), not the flags.
TEST(TransportSecurityTest, NamesTheSettingsAsItsUserGaveThem) {
  const SecuritySettingNames python{
      .cert = "tls_cert", .key = "tls_key", .ca = "tls_ca", .insecure = "insecure=True"};
  EXPECT_EQ(ChannelCredentialsFor({.cert_file = "c.crt", .ca_file = "ca.crt", .names = python})
                .status()
                .message(),
            "tls_cert and tls_key go together: give both");
  EXPECT_EQ(ChannelCredentialsFor({.ca_file = "ca.crt", .insecure = true, .names = python})
                .status()
                .message(),
            "insecure=True and TLS files were both given: choose one");
  EXPECT_EQ(ChannelCredentialsFor({.names = python}).status().message(),
            "no transport security chosen: give tls_cert, tls_key and tls_ca (see SECURITY.md), "
            "or insecure=True for plain text");
  testing::ScopedTempDir dir;
  EXPECT_THAT(
      std::string(ChannelCredentialsFor({.ca_file = dir.Join("missing.crt"), .names = python})
                      .status()
                      .message()),
      ::testing::StartsWith("tls_ca: "));
}

TEST(TransportSecurityTest, NamesAFileThatIsMissingOrNotPem) {
  testing::ScopedTempDir dir;
  const absl::Status missing = ChannelCredentialsFor({.ca_file = dir.Join("missing.crt")}).status();
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(), HasSubstr("--tls_ca"));
  EXPECT_THAT(missing.message(), HasSubstr("missing.crt"));
  ASSERT_TRUE(WriteStringToFile(Env::Default(), dir.Join("junk.crt"), "junk", false).ok());
  const absl::Status junk = ChannelCredentialsFor({.ca_file = dir.Join("junk.crt")}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(junk)) << junk;
  EXPECT_THAT(junk.message(), HasSubstr("junk.crt' is not a PEM file"));
}

TEST(TransportSecurityTest, MakesCredentialsFromIssuedFiles) {
  testing::ScopedTempDir dir;
  auto ca = CertificateAuthority::Create(dir.Join("tls"));
  ASSERT_TRUE(ca.ok()) << ca.status();
  const absl::StatusOr<TransportSecurity> worker =
      (*ca)->Issue("worker-0", WorkerIdentityUri("worker-0"));
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_TRUE(ServerCredentialsFor(*worker).ok());
  EXPECT_TRUE(ChannelCredentialsFor(*worker).ok());
  EXPECT_TRUE(ChannelCredentialsFor({.ca_file = worker->ca_file}).ok()) << "CA only: no identity";
}

TEST(TransportSecurityTest, WarnsOnlyForPlainTextOffLoopback) {
  const TransportSecurity plain{.insecure = true};
  EXPECT_EQ(PlaintextWarning(plain, "127.0.0.1"), "");
  EXPECT_EQ(PlaintextWarning(plain, "localhost"), "");
  EXPECT_EQ(PlaintextWarning(plain, "::1"), "");
  EXPECT_THAT(PlaintextWarning(plain, "0.0.0.0"), HasSubstr("WARNING: serving plain text"));
  EXPECT_THAT(PlaintextWarning(plain, "10.1.2.3"), HasSubstr("on 10.1.2.3"));
  EXPECT_EQ(PlaintextWarning(TransportSecurity{.ca_file = "ca.crt"}, "0.0.0.0"), "");
}

}  // namespace
}  // namespace granary
