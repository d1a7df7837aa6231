// The provisioners (issue 17) against a real shell and real worker processes' stand-ins: the
// command provisioner runs the user's command with the count and reports a failing command by
// name, exit and output; the local provisioner starts processes up to the count (and its max)
// and stops only idle ones of its own.
#include "dispatcher/provisioner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CommandProvisionerTest, RunsTheCommandWithTheCount) {
  testing::ScopedTempDir dir;
  const std::string out = dir.Join("replicas");
  auto provisioner = NewCommandProvisioner("echo replicas={n} >> " + out);
  ASSERT_TRUE(provisioner->Resize(3, {}).ok());
  ASSERT_TRUE(provisioner->Resize(1, {"w"}).ok());
  EXPECT_EQ(ReadFile(out), "replicas=3\nreplicas=1\n");
  EXPECT_THAT(provisioner->Describe(), HasSubstr("echo replicas={n}"));
}

TEST(CommandProvisionerTest, AFailingCommandIsAnErrorNamingItsExitAndOutput) {
  auto provisioner =
      NewCommandProvisioner("echo 'error: statefulset granary-worker not found' >&2; exit 3");
  const absl::Status status = provisioner->Resize(4, {});
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("exited with code 3"));
  EXPECT_THAT(status.message(), HasSubstr("statefulset granary-worker not found"));
  EXPECT_THAT(status.message(), HasSubstr("provision command 'echo"));
}

TEST(CommandProvisionerTest, ACommandPastItsTimeoutIsKilledAndReported) {
  auto provisioner = NewCommandProvisioner("sleep 30", std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status = provisioner->Resize(2, {});
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// A stand-in for `granary worker`: a shell script that announces an address like a server and
// records its id, then waits to be stopped.
class LocalProvisionerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    script_ = dir_.Join("fake-granary");
    std::ofstream s(script_);
    s << "#!/bin/sh\n"
         "for a in \"$@\"; do case $a in --worker_id=*) id=${a#--worker_id=};; esac; done\n"
         "echo \"$id $*\" >> "
      << dir_.Join("started") << "\n"
      << "echo \"granary worker $id listening on 127.0.0.1:1\"\n"
         "exec sleep 60\n";
    s.close();
    ASSERT_EQ(::chmod(script_.c_str(), 0755), 0);
  }
  std::unique_ptr<Provisioner> Make(int32_t max) {
    LocalProvisionerOptions options;
    options.binary = script_;
    options.dispatcher_address = "127.0.0.1:9";
    options.max_workers = max;
    options.flags = {"--tls_cert=/tls/{id}.pem"};
    return NewLocalProvisioner(options);
  }
  int Started() {
    const std::string s = ReadFile(dir_.Join("started"));
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
  }

  testing::ScopedTempDir dir_;
  std::string script_;
};

TEST_F(LocalProvisionerTest, StartsUpToTheCountAndMaxWithIdsAndFlags) {
  auto provisioner = Make(/*max=*/3);
  ASSERT_TRUE(provisioner->Resize(2, {}).ok());
  EXPECT_EQ(Started(), 2);
  const std::string started = ReadFile(dir_.Join("started"));
  EXPECT_THAT(started, HasSubstr("worker-0 worker --dispatcher=127.0.0.1:9 --worker_id=worker-0"));
  EXPECT_THAT(started, HasSubstr("--take_over_load --tls_cert=/tls/worker-1.pem"));
  ASSERT_TRUE(provisioner->Resize(10, {}).ok());  // capped at max
  EXPECT_EQ(Started(), 3);
  ASSERT_TRUE(provisioner->Resize(3, {}).ok());  // as many as asked: nothing new
  EXPECT_EQ(Started(), 3);
}

TEST_F(LocalProvisionerTest, StopsOnlyIdleWorkersOfItsOwnAndReusesTheirIds) {
  auto provisioner = Make(/*max=*/3);
  ASSERT_TRUE(provisioner->Resize(3, {}).ok());
  // Shrink to 1: only worker-2 is idle (and "other" is not its own).
  ASSERT_TRUE(provisioner->Resize(1, {"other", "worker-2"}).ok());
  // Grow to 3 again: worker-2's id is free and reused; nothing else starts.
  ASSERT_TRUE(provisioner->Resize(3, {}).ok());
  EXPECT_EQ(Started(), 4);
  EXPECT_THAT(ReadFile(dir_.Join("started")), HasSubstr("\nworker-2 "));
}

TEST_F(LocalProvisionerTest, ABinaryThatDoesNotStartIsAnErrorNamingTheWorker) {
  LocalProvisionerOptions options;
  options.binary = "/bin/false";
  options.dispatcher_address = "127.0.0.1:9";
  options.max_workers = 2;
  const absl::Status status = NewLocalProvisioner(options)->Resize(1, {});
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("worker-0"));
  EXPECT_THAT(status.message(), HasSubstr("exited with code 1"));
}

}  // namespace
}  // namespace granary
