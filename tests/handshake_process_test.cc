// Issue 30: a client whose transport security does not match the dispatcher's learns so at once,
// in a message naming the setting to pass — it used to wait out its deadline (10 s) and call the
// dispatcher unreachable. Against real dispatcher processes (TLS with certificates made by the
// openssl tool, and plain text), through the client library and `granary run`:
//  * a plain-text client of a TLS dispatcher, and a TLS client of a plain-text one: each fails
//    FailedPrecondition within 2 s saying which end speaks what;
//  * a certificate from another CA — the client trusting another CA than the one that signed
//    the dispatcher's, or presenting one the dispatcher's CA did not sign: Unauthenticated
//    within 2 s;
//  * a matching client connects, and a dispatcher that is down is still unreachable.
#include <csignal>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "granary/client.h"
#include "gtest/gtest.h"
#include "security/peer_identity.h"
#include "testing/scoped_temp_dir.h"
#include "testing/test_certificates.h"
#include "tests/local_cluster.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// What a mismatch must not wait out: the default rpc_timeout_ms.
constexpr int kRpcTimeoutMs = 10000;
constexpr absl::Duration kPromptly = absl::Seconds(2);

constexpr char kPipeline[] = R"({"source": {"type": "range", "params": {"stop": 100}},
  "ops": [{"op": "batch", "params": {"batch_size": 10}}]})";

class HandshakeProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Env::Default()->CreateDirs(dir_.Join("tls")).ok());
    ASSERT_TRUE(Env::Default()->CreateDirs(dir_.Join("other")).ok());
    certificates_ = std::make_unique<testing::TestCertificates>(dir_.Join("tls"));
    other_ = std::make_unique<testing::TestCertificates>(dir_.Join("other"));
    ASSERT_TRUE(certificates_->ok() && other_->ok());
    tls_ = std::make_unique<testing::LocalCluster>(
        dir_.Join("tls-cluster"),
        testing::LocalClusterOptions{
            .workers = 0,
            .issue_certificate = [this](const std::string& name, const std::string& identity) {
              return certificates_->Issue(name, identity);
            }});
    ASSERT_TRUE(tls_->ok());
    plain_ = std::make_unique<testing::LocalCluster>(dir_.Join("plain-cluster"),
                                                     testing::LocalClusterOptions{.workers = 0});
    ASSERT_TRUE(plain_->ok());
    ASSERT_TRUE(
        WriteStringToFile(Env::Default(), dir_.Join("pipeline.json"), kPipeline, false).ok());
  }

  // Client::Connect with `options` (rpc_timeout_ms the default); how long it took in *took.
  absl::Status Connect(ClientOptions options, absl::Duration* took) {
    options.rpc_timeout_ms = kRpcTimeoutMs;
    const absl::Time start = absl::Now();
    const absl::Status status = Client::Connect(options).status();
    *took = absl::Now() - start;
    return status;
  }

  // A client certificate of `ca`: options with its files.
  static ClientOptions WithCertificate(const std::string& address,
                                       const testing::TestCertificates& ca) {
    const TransportSecurity issued = ca.Issue("alice", ClientIdentityUri("alice"));
    return {.dispatcher_address = address,
            .tls_ca_file = issued.ca_file,
            .tls_cert_file = issued.cert_file,
            .tls_key_file = issued.key_file};
  }

  testing::ScopedTempDir dir_;
  std::unique_ptr<testing::TestCertificates> certificates_;
  std::unique_ptr<testing::TestCertificates> other_;
  std::unique_ptr<testing::LocalCluster> tls_;
  std::unique_ptr<testing::LocalCluster> plain_;
};

TEST_F(HandshakeProcessTest, APlainTextClientOfATlsDispatcherIsToldToPassTheCa) {
  absl::Duration took;
  const absl::Status status =
      Connect({.dispatcher_address = tls_->dispatcher_address(), .insecure = true}, &took);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              AllOf(HasSubstr("the dispatcher at " + tls_->dispatcher_address() +
                              " speaks TLS and this client plain text"),
                    HasSubstr("pass ClientOptions.tls_ca_file")));
  EXPECT_LT(took, kPromptly) << status;
}

TEST_F(HandshakeProcessTest, ATlsClientOfAPlainTextDispatcherIsToldToPassInsecure) {
  absl::Duration took;
  const absl::Status status =
      Connect(WithCertificate(plain_->dispatcher_address(), *certificates_), &took);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(
      std::string(status.message()),
      AllOf(HasSubstr("the dispatcher at " + plain_->dispatcher_address() + " speaks plain text"),
            HasSubstr("pass ClientOptions.insecure")));
  EXPECT_LT(took, kPromptly) << status;
}

TEST_F(HandshakeProcessTest, AClientTrustingAnotherCaIsToldTheDispatchersCertificateFails) {
  absl::Duration took;
  const absl::Status status = Connect(WithCertificate(tls_->dispatcher_address(), *other_), &took);
  EXPECT_TRUE(absl::IsUnauthenticated(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("presents a certificate that ClientOptions.tls_ca_file '" +
                        other_->ca_file() + "' does not verify for this address ("));
  EXPECT_LT(took, kPromptly) << status;
}

TEST_F(HandshakeProcessTest, ACertificateFromAnotherCaIsRefusedByTheDispatcher) {
  ClientOptions options = WithCertificate(tls_->dispatcher_address(), *other_);
  options.tls_ca_file = certificates_->ca_file();  // it trusts the dispatcher
  absl::Duration took;
  const absl::Status status = Connect(options, &took);
  EXPECT_TRUE(absl::IsUnauthenticated(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("refused this client's certificate, ClientOptions.tls_cert_file '" +
                        options.tls_cert_file + "'"));
  EXPECT_LT(took, kPromptly) << status;
}

TEST_F(HandshakeProcessTest, MatchingClientsConnect) {
  absl::Duration took;
  EXPECT_TRUE(Connect(WithCertificate(tls_->dispatcher_address(), *certificates_), &took).ok());
  EXPECT_TRUE(
      Connect({.dispatcher_address = plain_->dispatcher_address(), .insecure = true}, &took).ok());
}

TEST_F(HandshakeProcessTest, ADispatcherThatIsDownIsStillUnreachable) {
  const std::string address = plain_->dispatcher_address();
  plain_->StopDispatcher(SIGKILL);
  ClientOptions options{.dispatcher_address = address, .rpc_timeout_ms = 1500, .insecure = true};
  const absl::Time start = absl::Now();
  const absl::Status status = Client::Connect(options).status();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("dispatcher " + address + " is not reachable (waited 1500 ms)"));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(1500)) << "it gave up before its deadline";
}

// The command line names its flags.
TEST_F(HandshakeProcessTest, GranaryRunNamesTheFlagsToPass) {
  const auto run = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv = {GRANARY_BINARY, "run", "--epochs=1",
                                     "--pipeline=" + dir_.Join("pipeline.json")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const absl::Time start = absl::Now();
    Subprocess process(argv, Subprocess::Stderr::kMergeIntoStdout);
    const std::string output = process.ReadAll();
    EXPECT_EQ(process.Wait(), 1) << output;
    EXPECT_LT(absl::Now() - start, kPromptly + absl::Seconds(1)) << output;
    return output;
  };
  EXPECT_THAT(
      run({"--insecure", "--dispatcher=" + tls_->dispatcher_address()}),
      AllOf(HasSubstr("speaks TLS and this client plain text"), HasSubstr("pass --tls_ca")));
  const TransportSecurity alice = certificates_->Issue("alice", ClientIdentityUri("alice"));
  EXPECT_THAT(run({"--dispatcher=" + plain_->dispatcher_address(), "--tls_ca=" + alice.ca_file,
                   "--tls_cert=" + alice.cert_file, "--tls_key=" + alice.key_file}),
              AllOf(HasSubstr("speaks plain text"), HasSubstr("pass --insecure")));
}

}  // namespace
}  // namespace granary
