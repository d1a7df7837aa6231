#include "common/env.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Deterministic bytes (every value 0..255, non-periodic within 251 bytes).
std::string PatternBytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + i / 251) & 0xff);
  return s;
}

class PosixEnvTest : public ::testing::Test {
 protected:
  void Write(const std::string& name, const std::string& data) {
    ASSERT_TRUE(WriteStringToFile(env_, dir_.Join(name), data, /*sync=*/false).ok());
  }

  Env* const env_ = Env::Default();
  testing::ScopedTempDir dir_;
};

TEST_F(PosixEnvTest, DefaultIsOneInstance) { EXPECT_EQ(Env::Default(), Env::Default()); }

TEST_F(PosixEnvTest, WriteThenReadRoundTripsLargerThanTheWriteBuffer) {
  const std::string path = dir_.Join("data");
  const std::string data = PatternBytes(300 * 1024 + 17);
  ASSERT_TRUE(WriteStringToFile(env_, path, data, /*sync=*/true).ok());
  absl::StatusOr<std::string> read = ReadFileToString(env_, path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, data);
  absl::StatusOr<uint64_t> size = env_->GetFileSize(path);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, data.size());
}

TEST_F(PosixEnvTest, AppendFlushSyncCloseWritesEverything) {
  const std::string path = dir_.Join("appended");
  absl::StatusOr<std::unique_ptr<WritableFile>> file = env_->NewWritableFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->path(), path);
  ASSERT_TRUE((*file)->Append("hello, ").ok());
  ASSERT_TRUE((*file)->Flush().ok());
  // Flushed data is visible to readers before Close.
  EXPECT_EQ(*ReadFileToString(env_, path), "hello, ");
  ASSERT_TRUE((*file)->Append("world").ok());
  ASSERT_TRUE((*file)->Sync().ok());
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_EQ(*ReadFileToString(env_, path), "hello, world");
}

TEST_F(PosixEnvTest, NewWritableFileTruncates) {
  Write("f", "a long first version");
  Write("f", "short");
  EXPECT_EQ(*ReadFileToString(env_, dir_.Join("f")), "short");
}

TEST_F(PosixEnvTest, ReadReturnsZeroAtEndOfFile) {
  Write("f", "abc");
  absl::StatusOr<std::unique_ptr<SequentialFile>> file = env_->NewSequentialFile(dir_.Join("f"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->path(), dir_.Join("f"));
  char buf[16];
  absl::StatusOr<size_t> n = (*file)->Read(sizeof(buf), buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf, *n), "abc");
  n = (*file)->Read(sizeof(buf), buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TEST_F(PosixEnvTest, SkipAdvancesAndPastTheEndStaysAtTheEnd) {
  const std::string data = PatternBytes(1000);
  Write("f", data);
  absl::StatusOr<std::unique_ptr<SequentialFile>> file = env_->NewSequentialFile(dir_.Join("f"));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Skip(10).ok());
  char buf[5];
  ASSERT_EQ(*(*file)->Read(5, buf), 5u);
  EXPECT_EQ(std::string(buf, 5), data.substr(10, 5));
  ASSERT_TRUE((*file)->Skip(500).ok());
  ASSERT_EQ(*(*file)->Read(5, buf), 5u);
  EXPECT_EQ(std::string(buf, 5), data.substr(515, 5));
  ASSERT_TRUE((*file)->Skip(1 << 20).ok());
  EXPECT_EQ(*(*file)->Read(5, buf), 0u);
}

TEST_F(PosixEnvTest, RenameReplacesTheTarget) {
  Write("from", "new");
  Write("to", "old");
  ASSERT_TRUE(env_->RenameFile(dir_.Join("from"), dir_.Join("to")).ok());
  EXPECT_FALSE(env_->FileExists(dir_.Join("from")));
  EXPECT_EQ(*ReadFileToString(env_, dir_.Join("to")), "new");
}

TEST_F(PosixEnvTest, DeleteFileRemovesIt) {
  Write("f", "x");
  EXPECT_TRUE(env_->FileExists(dir_.Join("f")));
  ASSERT_TRUE(env_->DeleteFile(dir_.Join("f")).ok());
  EXPECT_FALSE(env_->FileExists(dir_.Join("f")));
}

TEST_F(PosixEnvTest, GlobReturnsSortedMatchesOnly) {
  for (const char* name : {"c.txt", "a.txt", "b.log", "b.txt"}) Write(name, name);
  absl::StatusOr<std::vector<std::string>> matches = env_->Glob(dir_.Join("*.txt"));
  ASSERT_TRUE(matches.ok()) << matches.status();
  EXPECT_THAT(*matches, ElementsAre(dir_.Join("a.txt"), dir_.Join("b.txt"), dir_.Join("c.txt")));
}

TEST_F(PosixEnvTest, GlobMatchingNothingIsEmptyNotAnError) {
  absl::StatusOr<std::vector<std::string>> matches = env_->Glob(dir_.Join("*.none"));
  ASSERT_TRUE(matches.ok()) << matches.status();
  EXPECT_THAT(*matches, IsEmpty());
}

TEST_F(PosixEnvTest, GetChildrenListsSortedNamesWithoutDots) {
  Write("zeta", "");
  Write("alpha", "");
  ASSERT_TRUE(env_->CreateDirs(dir_.Join("mid")).ok());
  absl::StatusOr<std::vector<std::string>> children = env_->GetChildren(dir_.path());
  ASSERT_TRUE(children.ok()) << children.status();
  EXPECT_THAT(*children, ElementsAre("alpha", "mid", "zeta"));
}

TEST_F(PosixEnvTest, CreateDirsMakesParentsAndAcceptsExisting) {
  const std::string deep = dir_.Join("a/b/c");
  ASSERT_TRUE(env_->CreateDirs(deep).ok());
  EXPECT_TRUE(env_->FileExists(deep));
  EXPECT_TRUE(env_->CreateDirs(deep).ok());
  ASSERT_TRUE(WriteStringToFile(env_, deep + "/f", "x", /*sync=*/false).ok());
  EXPECT_THAT(*env_->GetChildren(dir_.Join("a")), ElementsAre("b"));
}

TEST_F(PosixEnvTest, SyncDirSucceedsOnADirectory) {
  Write("f", "x");
  EXPECT_TRUE(env_->SyncDir(dir_.path()).ok());
}

TEST_F(PosixEnvTest, SyncDirOfMissingDirectoryIsNotFoundNamingIt) {
  const std::string missing = dir_.Join("no_such_dir");
  const absl::Status status = env_->SyncDir(missing);
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(missing));
}

TEST_F(PosixEnvTest, MissingFileErrorsAreNotFoundNamingThePath) {
  const std::string missing = dir_.Join("no_such_file");
  EXPECT_FALSE(env_->FileExists(missing));
  const std::vector<absl::Status> errors = {
      env_->NewSequentialFile(missing).status(),
      env_->GetFileSize(missing).status(),
      env_->DeleteFile(missing),
      env_->RenameFile(missing, dir_.Join("elsewhere")),
      env_->GetChildren(missing).status(),
      ReadFileToString(env_, missing).status(),
  };
  for (size_t i = 0; i < errors.size(); ++i) {
    EXPECT_TRUE(absl::IsNotFound(errors[i])) << "call " << i << ": " << errors[i];
    EXPECT_THAT(std::string(errors[i].message()), HasSubstr(missing)) << "call " << i;
  }
}

TEST_F(PosixEnvTest, CreatingAFileInAMissingDirectoryIsNotFoundNamingThePath) {
  const std::string path = dir_.Join("no_such_dir/f");
  const absl::Status status = env_->NewWritableFile(path).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(path));
}

TEST_F(PosixEnvTest, SleepAdvancesTheClock) {
  const uint64_t before = env_->NowMicros();
  env_->SleepForMicros(20000);
  const uint64_t after = env_->NowMicros();
  EXPECT_GE(after - before, 20000u);
}

}  // namespace
}  // namespace granary
