#include "security/data_roots.h"

#include <unistd.h>

#include "common/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class DataRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.Join("data");
    ASSERT_TRUE(Env::Default()->CreateDirs(root_ + "/train").ok());
    ASSERT_TRUE(WriteStringToFile(Env::Default(), root_ + "/train/a.tfrecord", "x", false).ok());
    ASSERT_TRUE(Env::Default()->CreateDirs(dir_.Join("data-other")).ok());
    ASSERT_TRUE(WriteStringToFile(Env::Default(), dir_.Join("secret"), "s", false).ok());
    roots_ = DataRoots::Create({root_}).value();
  }

  testing::ScopedTempDir dir_;
  std::string root_;
  DataRoots roots_;
};

TEST_F(DataRootsTest, AllowsPathsInsideARootWhetherOrNotTheyExist) {
  EXPECT_TRUE(roots_.Check("file", root_ + "/train/a.tfrecord").ok());
  EXPECT_TRUE(roots_.Check("file", root_ + "/train/not-yet-written").ok());
  EXPECT_TRUE(roots_.Check("file", root_ + "/./train/../train/a.tfrecord").ok());
  EXPECT_TRUE(roots_.Check("directory", root_).ok());
}

TEST_F(DataRootsTest, ACacheTiersUrlRootAllowsOnlyPathsUnderItsPrefixOnItsServer) {
  const DataRoots roots = roots_.With("redis://10.0.0.5:6379/granary");
  EXPECT_TRUE(roots.Check("chunk", "redis://10.0.0.5:6379/granary/k/0.chunk").ok());
  EXPECT_TRUE(roots.Check("chunk", "redis://10.0.0.5:6379/granary/./k/../k/0.chunk").ok());
  EXPECT_TRUE(absl::IsPermissionDenied(
      roots.Check("chunk", "redis://10.0.0.5:6379/granary/../../other/0.chunk")));
  EXPECT_TRUE(absl::IsPermissionDenied(roots.Check("chunk", "redis://10.0.0.6:6379/granary/k")));
  EXPECT_TRUE(absl::IsPermissionDenied(roots.Check("chunk", "redis://10.0.0.5:6379/granaryx/k")));
  EXPECT_TRUE(roots.Check("file", root_ + "/train/a.tfrecord").ok()) << "the directory still is";
}

TEST_F(DataRootsTest, OnlyAPathStartingWithASchemeIsAUrl) {
  EXPECT_TRUE(IsUrl("redis://10.0.0.5:6379/granary"));
  EXPECT_TRUE(IsUrl("s3+x.y-z://bucket/key"));
  EXPECT_FALSE(IsUrl("/data/x://etc/passwd"));
  EXPECT_FALSE(IsUrl("data/x://etc/passwd"));
  EXPECT_FALSE(IsUrl("://host/x"));
  EXPECT_FALSE(IsUrl("1redis://host/x"));
  EXPECT_FALSE(IsUrl("/data/train/a.tfrecord"));
}

// A directory named "x:" inside a root that links to "/": "<root>/x://…" once passed as a URL
// (compared lexically, its ".." swallowed by the "authority") and was opened through the link.
TEST_F(DataRootsTest, APathHoldingSchemeLikeTextIsResolvedAsAPath) {
  ASSERT_EQ(::symlink("/", (root_ + "/x:").c_str()), 0);
  const std::string escape = root_ + "/x://" + dir_.Join("secret").substr(1);
  absl::Status status = roots_.Check("file", escape);
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("/secret'"));
  status = roots_.Check("file", root_ + "/x://../../" + dir_.Join("secret").substr(1));
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
}

TEST_F(DataRootsTest, RefusesAnAbsolutePathOutsideNamingPathAndRoots) {
  const absl::Status status = roots_.Check("file", "/etc/passwd");
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("file '/etc/passwd' resolves to '/etc/passwd'"),
                    HasSubstr("outside the data roots"), HasSubstr(roots_.roots()[0])));
}

TEST_F(DataRootsTest, RefusesDotDotOutOfARoot) {
  const absl::Status status = roots_.Check("file", root_ + "/train/../../secret");
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("resolves to '" + ResolvePath(dir_.Join("secret"))));
  // "..": past a component that does not exist, applied lexically, still out.
  EXPECT_TRUE(absl::IsPermissionDenied(roots_.Check("file", root_ + "/nothing/../../secret")));
}

TEST_F(DataRootsTest, RefusesAPathWithANulByteThatTheSystemWouldCutShort) {
  // Resolved component by component this is <root>/train/a.tfrecord, inside; the system, reading
  // up to the NUL, would open <root>/../secret, outside.
  const std::string path =
      root_ + "/../secret" + std::string(1, '\0') + "/../data/train/a.tfrecord";
  ASSERT_EQ(ResolvePath(path), ResolvePath(root_ + "/train/a.tfrecord"));
  const absl::Status status = roots_.Check("file", path);
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("holds a NUL byte"));
  EXPECT_TRUE(absl::IsPermissionDenied(roots_.CheckPattern("file pattern", path + "*")));
}

TEST_F(DataRootsTest, RefusesASiblingWhoseNameStartsLikeTheRoot) {
  EXPECT_TRUE(absl::IsPermissionDenied(roots_.Check("file", dir_.Join("data-other/x"))));
}

TEST_F(DataRootsTest, RefusesASymlinkInsideThatPointsOut) {
  ASSERT_EQ(::symlink(dir_.Join("secret").c_str(), (root_ + "/train/link").c_str()), 0);
  const absl::Status status = roots_.Check("file", root_ + "/train/link");
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("/secret'"));
  // A symlinked directory inside that points out is refused for what lies under it too.
  ASSERT_EQ(::symlink(dir_.path().c_str(), (root_ + "/up").c_str()), 0);
  EXPECT_TRUE(absl::IsPermissionDenied(roots_.Check("file", root_ + "/up/secret")));
}

TEST_F(DataRootsTest, ResolvesASymlinkReachedAgainPastAMissingComponent) {
  // Found by data_roots_fuzzer: after a component that does not exist, ".." climbed back into
  // the root and the symlink after it was appended unresolved.
  ASSERT_EQ(::symlink(dir_.path().c_str(), (root_ + "/up").c_str()), 0);
  const std::string path = root_ + "/missing/../up/secret";
  EXPECT_EQ(ResolvePath(path), ResolvePath(dir_.Join("secret")));
  EXPECT_TRUE(absl::IsPermissionDenied(roots_.Check("file", path)));
  EXPECT_EQ(ResolvePath(root_ + "/missing/../train/new"), ResolvePath(root_) + "/train/new");
}

TEST_F(DataRootsTest, AllowsASymlinkInsideThatStaysInside) {
  ASSERT_EQ(::symlink((root_ + "/train/a.tfrecord").c_str(), (root_ + "/alias").c_str()), 0);
  EXPECT_TRUE(roots_.Check("file", root_ + "/alias").ok());
}

TEST_F(DataRootsTest, ResolvesRelativePathsAgainstTheWorkingDirectory) {
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(root_.c_str()), 0);
  EXPECT_TRUE(roots_.Check("file", "train/a.tfrecord").ok());
  EXPECT_TRUE(absl::IsPermissionDenied(roots_.Check("file", "../secret")));
  ASSERT_EQ(::chdir(cwd), 0);
}

TEST_F(DataRootsTest, NoRootsRefusesEverythingAndSaysHowToConfigure) {
  const absl::Status status = DataRoots().Check("file", root_ + "/train/a.tfrecord");
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("no data roots are configured (--data_roots)"));
}

TEST_F(DataRootsTest, CreateRefusesARootThatIsNotADirectory) {
  const absl::StatusOr<DataRoots> missing = DataRoots::Create({dir_.Join("missing")});
  EXPECT_TRUE(absl::IsInvalidArgument(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("missing' is not an existing directory"));
  EXPECT_FALSE(DataRoots::Create({dir_.Join("secret")}).ok());
  EXPECT_TRUE(DataRoots::Create({""}).value().roots().empty());
}

TEST_F(DataRootsTest, WithAddsADirectoryThatNeedNotExistYet) {
  const DataRoots with = roots_.With(dir_.Join("cache/not-yet"));
  EXPECT_TRUE(with.Check("file", dir_.Join("cache/not-yet/0.chunk")).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(with.Check("file", dir_.Join("cache/other"))));
  EXPECT_TRUE(absl::IsPermissionDenied(roots_.Check("file", dir_.Join("cache/not-yet/0.chunk"))))
      << "the original is unchanged";
}

TEST_F(DataRootsTest, PatternsAreCheckedAtTheirFixedDirectory) {
  EXPECT_TRUE(roots_.CheckPattern("file pattern", root_ + "/train/*.tfrecord").ok());
  EXPECT_TRUE(roots_.CheckPattern("file pattern", root_ + "/*/*.tfrecord").ok());
  const absl::Status up = roots_.CheckPattern("file pattern", root_ + "/../../*");
  EXPECT_TRUE(absl::IsPermissionDenied(up)) << up;
  EXPECT_THAT(up.message(), HasSubstr("file pattern '" + root_ + "/../../*' lists"));
  const absl::Status etc = roots_.CheckPattern("file pattern", "/etc/pass*");
  EXPECT_THAT(etc.message(), HasSubstr("lists '/etc'"));
  EXPECT_TRUE(absl::IsPermissionDenied(roots_.CheckPattern("file pattern", "/*")));
  // No wildcard: the pattern is a path.
  EXPECT_TRUE(absl::IsPermissionDenied(roots_.CheckPattern("file pattern", "/etc/passwd")));
}

}  // namespace
}  // namespace granary
