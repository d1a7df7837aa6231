// ChaosProcesses against a stand-in for the granary binary (a shell script), so the harness's
// own behaviour can be checked without real servers.
#include "faultinject/chaos_processes.h"

#include <sys/stat.h>

#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The dispatcher announces an address; workers never do (say, they wait for a dispatcher that
// is down, or crashed at a failpoint before serving); the client waits.
constexpr char kFakeGranary[] = R"(#!/bin/sh
case "$1" in
  dispatcher) echo "granary dispatcher listening on 127.0.0.1:1"; exec sleep 600 ;;
  *) exec sleep 600 ;;
esac
)";

// Issue 13 defect 17: polling a worker whose address is not known yet dialed "" (gRPC logged
// "dns:/// ... target uri is not valid" at every poll).
TEST(ChaosProcessesTest, DoesNotDialAWorkerThatHasNotAnnouncedItsAddress) {
  testing::ScopedTempDir dir;
  const std::string binary = dir.Join("fake_granary");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), binary, kFakeGranary, false).ok());
  ASSERT_EQ(::chmod(binary.c_str(), 0755), 0);
  ChaosProcessesOptions options;
  options.binary = binary;
  options.dir = dir.Join("chaos");
  options.workers = 1;
  ChaosProcesses processes(options);
  ASSERT_TRUE(processes.Start().ok());
  ASSERT_TRUE(processes.running("worker-0"));
  ASSERT_EQ(processes.Serving("worker-0").value_or(true), false);

  ::testing::internal::CaptureStderr();
  const int64_t written = processes.CheckpointsWritten("worker-0");
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(written, -1);
  EXPECT_THAT(logged, Not(HasSubstr("target uri is not valid")));
  EXPECT_THAT(logged, Not(HasSubstr("dns:///")));
}

}  // namespace
}  // namespace granary
