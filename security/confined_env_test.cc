#include "security/confined_env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::AllOf;
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

// "<root>/x://…" is a local path, not a URL: through a link "x:" → "/" it leads outside and is
// refused; inside a real directory "x:" it is read as a file of the root, checked as any other.
TEST_F(ConfinedEnvTest, APathHoldingSchemeLikeTextIsOpenedAsALocalPath) {
  ASSERT_EQ(::symlink("/", (root_ + "/x:").c_str()), 0);
  const absl::Status escape =
      ReadFileToString(env_.get(), root_ + "/x://" + dir_.Join("secret").substr(1)).status();
  EXPECT_TRUE(absl::IsPermissionDenied(escape)) << escape;
  ASSERT_TRUE(Env::Default()->CreateDirs(root_ + "/y:").ok());
  ASSERT_TRUE(WriteStringToFile(Env::Default(), root_ + "/y:/b.txt", "in y", false).ok());
  EXPECT_EQ(ReadFileToString(env_.get(), root_ + "/y://b.txt").value(), "in y");
  ASSERT_EQ(::mkfifo((root_ + "/y:/pipe").c_str(), 0600), 0);
  const absl::Status fifo = ReadFileToString(env_.get(), root_ + "/y://pipe").status();
  EXPECT_TRUE(absl::IsInvalidArgument(fifo)) << fifo;
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

// A FIFO in a root used to block the reading task in open() until a writer came — forever, and
// the worker then ignored SIGTERM. Now it is refused at once, naming it.
TEST_F(ConfinedEnvTest, AFifoInARootIsRefusedAtOnceNamingIt) {
  const std::string fifo = root_ + "/pipe.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::future<absl::Status> read =
      std::async(std::launch::async, [&] { return env_->NewSequentialFile(fifo).status(); });
  if (read.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    // Blocked in open(): a writer releases it, so the test fails instead of hanging.
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    read.wait();
    if (writer >= 0) ::close(writer);
    FAIL() << "opening a FIFO blocked";
  }
  const absl::Status status = read.get();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr(ResolvePath(fifo) + " is a FIFO (named pipe), not a regular file"));
}

TEST_F(ConfinedEnvTest, DevicesDirectoriesAndProcFilesAreRefusedNamingWhatTheyAre) {
  ConfinedEnv dev(Env::Default(), DataRoots::Create({"/dev"}).value());
  absl::Status status = dev.NewSequentialFile("/dev/zero").status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("/dev/zero is a character device, not a regular file"));

  status = env_->NewSequentialFile(root_).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr(ResolvePath(root_) + " is a directory, not a regular file"));

  // A root holding a /proc (a bind mount, or a root at /): its files are "regular" but hand
  // out the worker's environment and memory maps.
  ConfinedEnv proc(Env::Default(), DataRoots::Create({"/proc/self"}).value());
  status = ReadFileToString(&proc, "/proc/self/environ").status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), AllOf(HasSubstr("/proc/self/environ"),
                                      HasSubstr("a file of the kernel's proc filesystem")));
}

TEST_F(ConfinedEnvTest, ASymlinkToProcInsideARootIsRefusedAsOutside) {
  ASSERT_EQ(::symlink("/proc/self/environ", (root_ + "/environ").c_str()), 0);
  const absl::Status status = ReadFileToString(env_.get(), root_ + "/environ").status();
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("outside the data roots"));
}

// A ConfinedEnv's file opener that first runs `swap` — what someone who can write inside a root
// could do between ConfinedEnv's check of a path and its open.
ConfinedEnv::FileOpener SwapThenOpen(std::function<void()> swap) {
  return [swap = std::move(swap)](const std::string& path) {
    swap();
    return OpenRegularFile(path);
  };
}

TEST_F(ConfinedEnvTest, AFileSwappedForASymlinkAfterTheCheckIsNotFollowed) {
  const std::string file = root_ + "/a.txt";
  const std::string resolved = ResolvePath(file);
  ConfinedEnv env(Env::Default(), DataRoots::Create({root_}).value(), SwapThenOpen([&] {
                    ASSERT_EQ(::symlink(dir_.Join("secret").c_str(), (root_ + "/swap").c_str()), 0);
                    ASSERT_EQ(::rename((root_ + "/swap").c_str(), file.c_str()), 0);
                  }));
  const absl::Status status = ReadFileToString(&env, file).status();
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(resolved + " is a symbolic link, which is not followed"));
}

TEST_F(ConfinedEnvTest, ADirectorySwappedForASymlinkAfterTheCheckIsCaughtByTheOpenedFile) {
  ASSERT_TRUE(Env::Default()->CreateDirs(root_ + "/sub").ok());
  ASSERT_TRUE(WriteStringToFile(Env::Default(), root_ + "/sub/a.txt", "inside", false).ok());
  ASSERT_TRUE(Env::Default()->CreateDirs(dir_.Join("elsewhere")).ok());
  ASSERT_TRUE(
      WriteStringToFile(Env::Default(), dir_.Join("elsewhere/a.txt"), "outside", false).ok());
  ConfinedEnv env(Env::Default(), DataRoots::Create({root_}).value(), SwapThenOpen([&] {
                    ASSERT_EQ(::rename((root_ + "/sub").c_str(), (root_ + "/old").c_str()), 0);
                    ASSERT_EQ(::symlink(dir_.Join("elsewhere").c_str(), (root_ + "/sub").c_str()),
                              0);
                  }));
  const absl::Status status = ReadFileToString(&env, root_ + "/sub/a.txt").status();
  EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("file '" + root_ + "/sub/a.txt' was opened as '" +
                        ResolvePath(dir_.Join("elsewhere/a.txt")) + "', outside the data roots"));
}

// The documented limit (SECURITY.md): a hard link is a name inside the root like any other.
// Making one needs write access inside the root and, with fs.protected_hardlinks (Debian's
// default), ownership of the target or the right to read and write it — so it discloses only
// what its maker could copy in anyway.
TEST_F(ConfinedEnvTest, AHardLinkInsideARootIsReadAsAFileOfTheRoot) {
  ASSERT_EQ(::link(dir_.Join("secret").c_str(), (root_ + "/hard.txt").c_str()), 0);
  EXPECT_EQ(ReadFileToString(env_.get(), root_ + "/hard.txt").value(), "outside");
}

}  // namespace
}  // namespace granary
