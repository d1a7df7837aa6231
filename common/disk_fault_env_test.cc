#include "common/disk_fault_env.h"

#include <chrono>
#include <memory>
#include <thread>

#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

// Real files in a temporary directory, under a DiskFaultEnv following a real control file.
class DiskFaultEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.Join("data");
    ASSERT_TRUE(Env::Default()->CreateDirs(data_).ok());
    absl::StatusOr<std::unique_ptr<DiskFaultControl>> control =
        DiskFaultControl::Open(dir_.Join("faults"));
    ASSERT_TRUE(control.ok()) << control.status();
    control_ = *std::move(control);
    env_ = std::make_unique<DiskFaultEnv>(Env::Default(), control_.get());
  }

  // Sets the faults and waits until the control file was surely re-read.
  void SetFaults(const std::string& text) {
    ASSERT_TRUE(ReplaceDiskFaultControlFile(dir_.Join("faults"), text).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
  }

  testing::ScopedTempDir dir_;
  std::string data_;
  std::unique_ptr<DiskFaultControl> control_;
  std::unique_ptr<DiskFaultEnv> env_;
};

TEST_F(DiskFaultEnvTest, HealthyDiskPassesEveryOperationThrough) {
  const std::string file = data_ + "/f";
  ASSERT_TRUE(WriteStringToFile(env_.get(), file, "bytes", /*sync=*/true).ok());
  absl::StatusOr<std::string> read = ReadFileToString(env_.get(), file);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "bytes");
  EXPECT_TRUE(env_->SyncDir(data_).ok());
  EXPECT_TRUE(env_->RenameFile(file, data_ + "/g").ok());
  EXPECT_TRUE(env_->DeleteFile(data_ + "/g").ok());
}

TEST_F(DiskFaultEnvTest, EioWriteFailsCreatingAppendingRenamingAndDeleting) {
  const std::string kept = data_ + "/kept";
  ASSERT_TRUE(WriteStringToFile(env_.get(), kept, "old", true).ok());
  absl::StatusOr<std::unique_ptr<WritableFile>> open = env_->NewWritableFile(data_ + "/open");
  ASSERT_TRUE(open.ok()) << open.status();
  SetFaults("eio write " + data_ + "\n");

  const absl::Status created = WriteStringToFile(env_.get(), data_ + "/new", "x", true);
  EXPECT_EQ(created.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(created.message(), HasSubstr("Input/output error (injected by"));
  EXPECT_FALSE(Env::Default()->FileExists(data_ + "/new"));
  EXPECT_EQ((*open)->Append("x").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(env_->RenameFile(kept, data_ + "/moved").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(env_->DeleteFile(kept).code(), absl::StatusCode::kInternal);
  // The failed operations did nothing, and reads still work.
  absl::StatusOr<std::string> read = ReadFileToString(env_.get(), kept);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "old");

  SetFaults("");
  EXPECT_TRUE((*open)->Append("x").ok());
  EXPECT_TRUE(WriteStringToFile(env_.get(), data_ + "/new", "x", true).ok());
}

TEST_F(DiskFaultEnvTest, EioReadFailsOpeningReadingAndListing) {
  const std::string file = data_ + "/f";
  ASSERT_TRUE(WriteStringToFile(env_.get(), file, "bytes", true).ok());
  absl::StatusOr<std::unique_ptr<SequentialFile>> open = env_->NewSequentialFile(file);
  ASSERT_TRUE(open.ok()) << open.status();
  SetFaults("eio read " + data_ + "\n");

  EXPECT_EQ(ReadFileToString(env_.get(), file).status().code(), absl::StatusCode::kInternal);
  char scratch[8];
  EXPECT_EQ((*open)->Read(sizeof(scratch), scratch).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(env_->GetChildren(data_).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(env_->GetFileSize(file).status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(WriteStringToFile(env_.get(), data_ + "/g", "w", true).ok());

  SetFaults("");
  absl::StatusOr<size_t> n = (*open)->Read(sizeof(scratch), scratch);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(scratch, *n), "bytes");
}

TEST_F(DiskFaultEnvTest, EioSyncFailsFileAndDirectorySyncsButNotWrites) {
  SetFaults("eio sync " + data_ + "\n");
  absl::StatusOr<std::unique_ptr<WritableFile>> file = env_->NewWritableFile(data_ + "/f");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->Append("bytes").ok());
  EXPECT_EQ((*file)->Sync().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(env_->SyncDir(data_).code(), absl::StatusCode::kInternal);
  SetFaults("");
  EXPECT_TRUE((*file)->Sync().ok());
  EXPECT_TRUE(env_->SyncDir(data_).ok());
}

TEST_F(DiskFaultEnvTest, StalledSyncTakesItsDelayAndSucceeds) {
  SetFaults("stall sync " + data_ + " 400ms\n");
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(WriteStringToFile(env_.get(), data_ + "/f", "bytes", /*sync=*/true).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(400));
  absl::StatusOr<std::string> read = ReadFileToString(Env::Default(), data_ + "/f");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "bytes");
}

TEST_F(DiskFaultEnvTest, OtherPathsAreUnaffected) {
  const std::string elsewhere = dir_.Join("elsewhere");
  SetFaults("eio write " + data_ + "\neio read " + data_ + "\neio sync " + data_ + "\n");
  ASSERT_TRUE(WriteStringToFile(env_.get(), elsewhere, "bytes", true).ok());
  absl::StatusOr<std::string> read = ReadFileToString(env_.get(), elsewhere);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "bytes");
}

}  // namespace
}  // namespace granary
