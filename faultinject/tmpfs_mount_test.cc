#include "faultinject/tmpfs_mount.h"

#include <unistd.h>

#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

TEST(TmpfsMountTest, FillRunsTheDiskOutOfSpaceAndDeletingTheFillerFreesIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  testing::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<TmpfsMount>> mount = TmpfsMount::Mount(dir.Join("tmpfs"), 1 << 20);
  ASSERT_TRUE(mount.ok()) << mount.status();
  const std::string file = (*mount)->Join("data");
  absl::StatusOr<int64_t> filled = (*mount)->Fill("filler");
  ASSERT_TRUE(filled.ok()) << filled.status();
  EXPECT_GT(*filled, 0);
  EXPECT_LE(*filled, 1 << 20);
  const absl::Status full = WriteStringToFile(Env::Default(), file, std::string(8192, 'd'), true);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;

  ASSERT_TRUE(Env::Default()->DeleteFile((*mount)->Join("filler")).ok());
  EXPECT_TRUE(WriteStringToFile(Env::Default(), file, std::string(8192, 'd'), true).ok());
  EXPECT_TRUE((*mount)->Unmount().ok());
  EXPECT_FALSE(Env::Default()->FileExists(file));  // It was on the tmpfs.
}

TEST(TmpfsMountTest, FillOfAFileThatCannotBeCreatedNamesIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  testing::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<TmpfsMount>> mount = TmpfsMount::Mount(dir.Join("tmpfs"), 1 << 20);
  ASSERT_TRUE(mount.ok()) << mount.status();
  absl::StatusOr<int64_t> filled = (*mount)->Fill("no/such/dir/filler");
  EXPECT_THAT(filled.status().message(), HasSubstr((*mount)->Join("no/such/dir/filler")));
}

TEST(TmpfsMountTest, WithoutRootMountIsFailedPreconditionSayingSo) {
  if (::geteuid() == 0) GTEST_SKIP() << "runs as root: the refusal cannot happen";
  testing::ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<TmpfsMount>> mount = TmpfsMount::Mount(dir.Join("tmpfs"), 1 << 20);
  EXPECT_EQ(mount.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(mount.status().message(), HasSubstr("needs root"));
}

}  // namespace
}  // namespace granary
