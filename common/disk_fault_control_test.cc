#include "common/disk_fault_control.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// Replaces `file`, as a harness does.
void WriteControl(const std::string& file, const std::string& text) {
  ASSERT_TRUE(ReplaceDiskFaultControlFile(file, text).ok());
}

// Long enough for the control file to be re-read (every 50 ms at most).
void AwaitReread() { std::this_thread::sleep_for(std::chrono::milliseconds(120)); }

TEST(ParseDiskFaultsTest, ParsesEveryFormAndSkipsCommentsAndBlankLines) {
  absl::StatusOr<std::vector<DiskFault>> faults = ParseDiskFaults(
      "# a comment\n\neio write /a\n  eio read /b  \neio sync /c\nstall sync /d 3000ms\n"
      "stall read /e 2s\n",
      "faults");
  ASSERT_TRUE(faults.ok()) << faults.status();
  ASSERT_EQ(faults->size(), 5u);
  EXPECT_EQ(DiskFaultLine((*faults)[0]), "eio write /a");
  EXPECT_EQ(DiskFaultLine((*faults)[1]), "eio read /b");
  EXPECT_EQ(DiskFaultLine((*faults)[2]), "eio sync /c");
  EXPECT_EQ(DiskFaultLine((*faults)[3]), "stall sync /d 3000ms");
  EXPECT_EQ((*faults)[3].stall, absl::Seconds(3));
  EXPECT_EQ(DiskFaultLine((*faults)[4]), "stall read /e 2000ms");
}

TEST(ParseDiskFaultsTest, EmptyTextIsAHealthyDisk) {
  absl::StatusOr<std::vector<DiskFault>> faults = ParseDiskFaults("", "faults");
  ASSERT_TRUE(faults.ok()) << faults.status();
  EXPECT_TRUE(faults->empty());
}

TEST(ParseDiskFaultsTest, EachMalformedLineIsInvalidArgumentNamingFileLineAndProblem) {
  const struct {
    const char* line;
    const char* problem;
  } cases[] = {
      {"fail write /a", "'fail' is not a fault (eio or stall)"},
      {"eio append /a", "'append' is not an operation (read, write or sync)"},
      {"eio write", "expected 'eio <read|write|sync> <path-prefix>'"},
      {"eio write /a /b", "expected 'eio <read|write|sync> <path-prefix>'"},
      {"stall sync /a", "expected 'stall <read|write|sync> <path-prefix> <delay"},
      {"stall sync /a 3000", "'3000' is not a positive delay"},
      {"stall sync /a -5ms", "'-5ms' is not a positive delay"},
      {"stall sync /a 0ms", "'0ms' is not a positive delay"},
      {"stall sync /a inf", "'inf' is not a positive delay"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::vector<DiskFault>> faults =
        ParseDiskFaults(absl::StrCat("eio read /ok\n\n", c.line, "\n"), "/run/faults");
    ASSERT_FALSE(faults.ok()) << c.line;
    EXPECT_EQ(faults.status().code(), absl::StatusCode::kInvalidArgument) << c.line;
    EXPECT_THAT(faults.status().message(),
                HasSubstr(absl::StrCat("disk fault control file /run/faults:3: '", c.line,
                                       "': ", c.problem)));
  }
}

class DiskFaultControlTest : public ::testing::Test {
 protected:
  std::string control_file() const { return dir_.Join("faults"); }
  testing::ScopedTempDir dir_;
};

TEST_F(DiskFaultControlTest, MissingFileIsAHealthyDisk) {
  absl::StatusOr<std::unique_ptr<DiskFaultControl>> control =
      DiskFaultControl::Open(control_file());
  ASSERT_TRUE(control.ok()) << control.status();
  EXPECT_TRUE((*control)->Before(DiskOp::kWrite, "/anything").ok());
}

TEST_F(DiskFaultControlTest, UnparsableFileAtOpenIsItsParseError) {
  WriteControl(control_file(), "eio scribble /a\n");
  absl::StatusOr<std::unique_ptr<DiskFaultControl>> control =
      DiskFaultControl::Open(control_file());
  EXPECT_EQ(control.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(control.status().message(), HasSubstr(control_file() + ":1:"));
}

TEST_F(DiskFaultControlTest, EioMatchesOnlyItsOperationAndPathPrefix) {
  WriteControl(control_file(), "eio write /data/journal\n");
  absl::StatusOr<std::unique_ptr<DiskFaultControl>> control =
      DiskFaultControl::Open(control_file());
  ASSERT_TRUE(control.ok()) << control.status();
  const absl::Status failed = (*control)->Before(DiskOp::kWrite, "/data/journal/000004.log");
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(failed.message(),
              HasSubstr(absl::StrCat("write /data/journal/000004.log: Input/output error "
                                     "(injected by ",
                                     control_file(), ")")));
  EXPECT_TRUE((*control)->Before(DiskOp::kRead, "/data/journal/000004.log").ok());
  EXPECT_TRUE((*control)->Before(DiskOp::kSync, "/data/journal/000004.log").ok());
  EXPECT_TRUE((*control)->Before(DiskOp::kWrite, "/data/checkpoints/x").ok());
}

TEST_F(DiskFaultControlTest, StallWaitsItsDelayThenSucceeds) {
  WriteControl(control_file(), "stall sync /data 300ms\n");
  absl::StatusOr<std::unique_ptr<DiskFaultControl>> control =
      DiskFaultControl::Open(control_file());
  ASSERT_TRUE(control.ok()) << control.status();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE((*control)->Before(DiskOp::kSync, "/data/f").ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
  const auto other = std::chrono::steady_clock::now();
  EXPECT_TRUE((*control)->Before(DiskOp::kWrite, "/data/f").ok());
  EXPECT_LT(std::chrono::steady_clock::now() - other, std::chrono::milliseconds(300));
}

TEST_F(DiskFaultControlTest, FollowsTheFileAsItChangesAndHeals) {
  absl::StatusOr<std::unique_ptr<DiskFaultControl>> control =
      DiskFaultControl::Open(control_file());
  ASSERT_TRUE(control.ok()) << control.status();
  EXPECT_TRUE((*control)->Before(DiskOp::kRead, "/data/f").ok());
  WriteControl(control_file(), "eio read /data\n");
  AwaitReread();
  EXPECT_EQ((*control)->Before(DiskOp::kRead, "/data/f").code(), absl::StatusCode::kInternal);
  WriteControl(control_file(), "");
  AwaitReread();
  EXPECT_TRUE((*control)->Before(DiskOp::kRead, "/data/f").ok());
}

TEST_F(DiskFaultControlTest, FileBecomingUnparsableKeepsTheFaultsReadBefore) {
  WriteControl(control_file(), "eio sync /data\n");
  absl::StatusOr<std::unique_ptr<DiskFaultControl>> control =
      DiskFaultControl::Open(control_file());
  ASSERT_TRUE(control.ok()) << control.status();
  WriteControl(control_file(), "eio sink /data\n");
  AwaitReread();
  EXPECT_EQ((*control)->Before(DiskOp::kSync, "/data/f").code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace granary
