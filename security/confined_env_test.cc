#include "security/confined_env.h"

#include <unistd.h>

#include "common/scoped_temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ConfinedEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.Join("data");
    ASSERT_TRUE(Env::Default()->CreateDirs(root_).ok());
    ASSERT_TRUE(WriteStringToFile(Env::Default(), root_ + "/a.txt", "inside", false).ok());
    ASSERT_TRUE(WriteStringToFile(Env::Default(), dir_.Join("secret"), "outside", false).ok());
    env_ = std::make_unique<ConfinedEnv>(Env::Default(), DataRoots::Create({root_}).value());
  }

  testing::ScopedTempDir dir_;
  std::string root_;
  std::unique_ptr<ConfinedEnv> env_;
};

TEST_F(ConfinedEnvTest, ReadsInsideItsRoots) {
  EXPECT_EQ(ReadFileToString(env_.get(), root_ + "/a.txt").value(), "inside");
  EXPECT_EQ(env_->GetFileSize(root_ + "/a.txt").value(), 6u);
  EXPECT_TRUE(env_->FileExists(root_ + "/a.txt"));
  EXPECT_THAT(env_->Glob(root_ + "/*.txt").value(), ElementsAre(root_ + "/a.txt"));
}

TEST_F(ConfinedEnvTest, RefusesEveryOperationOutsideNamingThePath) {
  const std::string secret = dir_.Join("secret");
  const absl::Status read = ReadFileToString(env_.get(), secret).status();
  EXPECT_TRUE(absl::IsPermissionDenied(read)) << read;
  EXPECT_THAT(read.message(), HasSubstr("file '" + secret + "'"));
  EXPECT_TRUE(absl::IsPermissionDenied(env_->GetFileSize(secret).status()));
  EXPECT_FALSE(env_->FileExists(secret)) << "exists, but is not to be known";
  EXPECT_TRUE(absl::IsPermissionDenied(env_->GetChildren(dir_.path()).status()));
  EXPECT_TRUE(absl::IsPermissionDenied(env_->NewWritableFile(dir_.Join("new")).status()));
  EXPECT_TRUE(absl::IsPermissionDenied(env_->DeleteFile(secret)));
  EXPECT_TRUE(absl::IsPermissionDenied(env_->RenameFile(root_ + "/a.txt", secret)));
  EXPECT_TRUE(absl::IsPermissionDenied(env_->CreateDirs(dir_.Join("d"))));
  EXPECT_TRUE(absl::IsPermissionDenied(env_->SyncDir(dir_.path())));
  EXPECT_EQ(ReadFileToString(Env::Default(), secret).value(), "outside") << "nothing touched";
}

TEST_F(ConfinedEnvTest, GlobOutsideIsRefusedBeforeListing) {
  const absl::Status status = env_->Glob(root_ + "/../*").status();
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("lists '" + ResolvePath(dir_.path()) + "'"));
}

TEST_F(ConfinedEnvTest, GlobMatchingASymlinkThatPointsOutIsRefusedNamingTheMatch) {
  ASSERT_EQ(::symlink(dir_.Join("secret").c_str(), (root_ + "/b.txt").c_str()), 0);
  const absl::Status status = env_->Glob(root_ + "/*.txt").status();
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("file '" + root_ + "/b.txt' resolves to"));
}

}  // namespace
}  // namespace granary
