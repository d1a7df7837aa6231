#include "cache/redis_env.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "cache/cache_tier_env.h"
#include "cache/local_redis_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

absl::Status Write(Env& env, const std::string& path, const std::string& data) {
  absl::StatusOr<std::unique_ptr<WritableFile>> file = env.NewWritableFile(path);
  if (!file.ok()) return file.status();
  if (absl::Status s = (*file)->Append(data); !s.ok()) return s;
  if (absl::Status s = (*file)->Sync(); !s.ok()) return s;
  return (*file)->Close();
}

class RedisEnvTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(redis_.ok()) << "redis-server did not start"; }

  LocalRedisServer redis_;
  CacheTierEnv env_{Env::Default()};
};

TEST_F(RedisEnvTest, ValuesAreWrittenReadRenamedListedAndDeletedLikeFiles) {
  const std::string dir = redis_.url() + "/granary/k1";
  ASSERT_TRUE(env_.CreateDirs(dir).ok());
  std::string chunk(1 << 20, '\0');
  for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(Write(env_, dir + "/0.tmp", chunk).ok());
  ASSERT_TRUE(env_.RenameFile(dir + "/0.tmp", dir + "/0.chunk").ok());
  EXPECT_FALSE(env_.FileExists(dir + "/0.tmp"));
  EXPECT_TRUE(env_.FileExists(dir + "/0.chunk"));
  EXPECT_TRUE(env_.FileExists(dir)) << "a directory exists while a value is under it";
  absl::StatusOr<std::string> read = ReadFileToString(&env_, dir + "/0.chunk");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == chunk) << "the bytes read back differ";
  EXPECT_EQ(*env_.GetFileSize(dir + "/0.chunk"), chunk.size());
  ASSERT_TRUE(Write(env_, dir + "/1.chunk", "x").ok());
  EXPECT_THAT(*env_.GetChildren(dir), ElementsAre("0.chunk", "1.chunk"));
  EXPECT_THAT(*env_.GetChildren(redis_.url() + "/granary"), ElementsAre("k1"));
  EXPECT_EQ(env_.DeleteDir(dir).code(), absl::StatusCode::kFailedPrecondition)
      << "like rmdir: not while values are under it";
  ASSERT_TRUE(env_.DeleteFile(dir + "/0.chunk").ok());
  ASSERT_TRUE(env_.DeleteFile(dir + "/1.chunk").ok());
  EXPECT_TRUE(env_.DeleteDir(dir).ok());
  EXPECT_FALSE(env_.FileExists(dir));
}

TEST_F(RedisEnvTest, RenamingADirectoryMovesEveryValueUnderIt) {
  const std::string root = redis_.url() + "/granary";
  ASSERT_TRUE(Write(env_, root + "/k/a.chunk", "a").ok());
  ASSERT_TRUE(Write(env_, root + "/k/b.chunk", "b").ok());
  ASSERT_TRUE(env_.RenameFile(root + "/k", root + "/evicted-k-5").ok());
  EXPECT_FALSE(env_.FileExists(root + "/k"));
  EXPECT_THAT(*env_.GetChildren(root + "/evicted-k-5"), ElementsAre("a.chunk", "b.chunk"));
  EXPECT_EQ(*ReadFileToString(&env_, root + "/evicted-k-5/b.chunk"), "b");
}

TEST_F(RedisEnvTest, AMissingValueIsNotFoundNamingIt) {
  const std::string path = redis_.url() + "/granary/none.chunk";
  const absl::Status read = ReadFileToString(&env_, path).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.message(), HasSubstr(path));
  EXPECT_EQ(env_.DeleteFile(path).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(env_.GetFileSize(path).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RedisEnvTest, AServerDownIsUnavailableAndARestartedOneHasLostItsValues) {
  const std::string path = redis_.url() + "/granary/k/0.chunk";
  ASSERT_TRUE(Write(env_, path, "cached").ok());
  {  // More pooled connections than a call has attempts: eight values open at once.
    std::vector<std::unique_ptr<SequentialFile>> open;
    for (int i = 0; i < 8; ++i) open.push_back(*env_.NewSequentialFile(path));
    for (auto& file : open) {  // read to the end: each connection goes back to the pool
      char bytes[6];
      ASSERT_EQ(*file->Read(sizeof(bytes), bytes), sizeof(bytes));
    }
  }
  ASSERT_TRUE(redis_.Restart());  // no persistence: empty again
  // The pooled connections are gone: the call retries on a new one.
  const absl::Status read = ReadFileToString(&env_, path).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kNotFound) << read;
  ASSERT_TRUE(Write(env_, path, "again").ok());
  EXPECT_EQ(*ReadFileToString(&env_, path), "again");

  RedisEnv nowhere("redis://127.0.0.1:1", Env::Default());
  const absl::Status down = nowhere.Put("redis://127.0.0.1:1/x", "y");
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(down.message(), HasSubstr("redis://127.0.0.1:1"));
}

// A chunk's reader that stops halfway (a task cancelled mid-Get) gives its connection up, not
// back: the next reads get whole values, not the rest of the abandoned one.
TEST_F(RedisEnvTest, AValueDroppedMidReadLeavesLaterReadsWhole) {
  const std::string big = redis_.url() + "/granary/k/big.chunk";
  const std::string small = redis_.url() + "/granary/k/small.chunk";
  ASSERT_TRUE(Write(env_, big, std::string(4 << 20, 'b')).ok());
  ASSERT_TRUE(Write(env_, small, "small").ok());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::unique_ptr<SequentialFile>> file = env_.NewSequentialFile(big);
    ASSERT_TRUE(file.ok()) << file.status();
    char head[100];
    ASSERT_EQ(*(*file)->Read(sizeof(head), head), sizeof(head));
    EXPECT_EQ(head[99], 'b');
  }
  EXPECT_EQ(*ReadFileToString(&env_, small), "small");
  EXPECT_EQ(ReadFileToString(&env_, big)->size(), size_t{4 << 20});
}

// A value deleted (or replaced) while it is read in pieces: the read fails naming it, and
// never returns a mix of two values.
TEST_F(RedisEnvTest, AValueDeletedWhileReadFailsNamingIt) {
  const std::string path = redis_.url() + "/granary/k/big.chunk";
  ASSERT_TRUE(Write(env_, path, std::string(8 << 20, 'b')).ok());
  absl::StatusOr<std::unique_ptr<SequentialFile>> file = env_.NewSequentialFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::string head(1 << 20, '\0');
  ASSERT_EQ(*(*file)->Read(head.size(), head.data()), head.size());
  CacheTierEnv other(Env::Default());
  ASSERT_TRUE(other.DeleteFile(path).ok());
  std::string rest(7 << 20, '\0');
  const absl::StatusOr<size_t> read = (*file)->Read(rest.size(), rest.data());
  ASSERT_FALSE(read.ok()) << "read " << *read << " bytes of a deleted value";
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(read.status().message(), HasSubstr("changed while it was read"));
  EXPECT_THAT(read.status().message(), HasSubstr("big.chunk"));
  EXPECT_EQ((*file)->Read(rest.size(), rest.data()).status(), read.status())
      << "a later read goes on past the failure";
}

TEST_F(RedisEnvTest, GlobMatchesChunkNamesAcrossTheirHashTag) {
  const std::string dir = redis_.url() + "/granary/k";
  ASSERT_TRUE(Write(env_, dir + "/t1-g0-i0-n3.chunk", "1").ok());
  ASSERT_TRUE(Write(env_, dir + "/t2-g0-i0-n3.chunk", "2").ok());
  ASSERT_TRUE(Write(env_, dir + "/sub/t1-g0-i0-n3.chunk", "3").ok());
  EXPECT_THAT(*env_.Glob(dir + "/t1-g0-i0-n3.chunk"), ElementsAre(dir + "/t1-g0-i0-n3.chunk"));
  EXPECT_THAT(*env_.Glob(dir + "/t1-*"), ElementsAre(dir + "/t1-g0-i0-n3.chunk"));
  EXPECT_THAT(*env_.Glob(dir + "/*.chunk"),
              ElementsAre(dir + "/t1-g0-i0-n3.chunk", dir + "/t2-g0-i0-n3.chunk"));
}

// cache/FORMAT.md's example: a chunk's temporary and committed names share the hash tag.
TEST_F(RedisEnvTest, KeysAreTaggedWithTheNameUpToItsLastDash) {
  RedisEnv redis(redis_.url(), Env::Default());
  const std::string dir = redis_.url() + "/granary/0123abcd/";
  EXPECT_EQ(*redis.KeyOf(dir + "t3-g0-i256-n128.chunk"),
            "{granary/0123abcd/t3-g0-i256}-n128.chunk");
  EXPECT_EQ(*redis.KeyOf(dir + "t3-g0-i256-r00ff.tmp"), "{granary/0123abcd/t3-g0-i256}-r00ff.tmp");
  EXPECT_EQ(*redis.KeyOf(redis_.url() + "/granary/no-dash/x.chunk"), "{granary/no-dash/x.chunk}");
}

TEST_F(RedisEnvTest, APathWithBracesIsRefusedNamingIt) {
  const std::string path = redis_.url() + "/granary/{k}/0.chunk";
  const absl::Status put = Write(env_, path, "x");
  EXPECT_EQ(put.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(put.message(), HasSubstr(path));
}

TEST_F(RedisEnvTest, OtherPathsAreTheBaseEnvsFilesAndRenamesBetweenTiersAreRefused) {
  testing::ScopedTempDir dir;
  const std::string file = dir.Join("plain.chunk");
  ASSERT_TRUE(Write(env_, file, "on disk").ok());
  EXPECT_TRUE(Env::Default()->FileExists(file));
  EXPECT_EQ(env_.RenameFile(file, redis_.url() + "/granary/x").code(),
            absl::StatusCode::kInvalidArgument);
}

// Authentication (SECURITY.md, "The Redis cache tier"): a Redis that asks for a password, or
// that knows only an ACL user.
constexpr char kPassword[] = "correct horse battery staple";

// A chunk of more than one GETRANGE piece, so that the streamed read path (a connection a
// value keeps) is authenticated too.
std::string LargeChunk() {
  std::string chunk(RedisNodes::Value::kPiece * 2 + 17, '\0');
  for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<char>(i * 13);
  return chunk;
}

TEST(RedisAuthTest, ACacheThroughAPasswordProtectedRedisWritesAndReads) {
  LocalRedisServer redis({"--requirepass", kPassword});
  ASSERT_TRUE(redis.ok()) << "redis-server did not start";
  CacheTierEnv env(Env::Default(), {.user = "", .password = kPassword});
  const std::string path = redis.url() + "/granary/k/0.chunk";
  const std::string chunk = LargeChunk();
  const absl::Status written = Write(env, path, chunk);
  ASSERT_TRUE(written.ok()) << written;
  absl::StatusOr<std::string> read = ReadFileToString(&env, path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == chunk) << "the bytes read back differ";
}

// The ACL SECURITY.md recommends: the cache root's keys only, no dangerous command.
std::vector<std::string> GranaryAclUser() {
  return {"--user",       "granary",     "on",      absl::StrCat(">", kPassword),
          "~{granary/*",  "+@read",      "+@write", "+@keyspace",
          "+@connection", "-@dangerous", "+info",   "+cluster|slots",
          "--user",       "default",     "off"};
}

TEST(RedisAuthTest, AnAclUserWritesAndReadsAndIsDeniedOtherKeys) {
  LocalRedisServer redis(GranaryAclUser());
  ASSERT_TRUE(redis.ok()) << "redis-server did not start";
  CacheTierEnv env(Env::Default(), {.user = "granary", .password = kPassword});
  const std::string path = redis.url() + "/granary/k/0.chunk";
  ASSERT_TRUE(Write(env, path, "as granary").ok());
  EXPECT_EQ(*ReadFileToString(&env, path), "as granary");
  EXPECT_THAT(*env.GetChildren(redis.url() + "/granary/k"), ElementsAre("0.chunk"));
  ASSERT_TRUE(env.RenameFile(path, redis.url() + "/granary/k/1.chunk").ok());
  const absl::Status denied = Write(env, redis.url() + "/other/k/0.chunk", "x");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied) << denied;
  EXPECT_THAT(denied.message(), HasSubstr("NOPERM"));
}

TEST(RedisAuthTest, AMissingPasswordIsUnauthenticatedNamingTheServer) {
  LocalRedisServer redis({"--requirepass", kPassword});
  ASSERT_TRUE(redis.ok()) << "redis-server did not start";
  CacheTierEnv env(Env::Default());
  const absl::Status written = Write(env, redis.url() + "/granary/k/0.chunk", "x");
  EXPECT_EQ(written.code(), absl::StatusCode::kUnauthenticated) << written;
  EXPECT_THAT(written.message(), HasSubstr(redis.url()));
  EXPECT_THAT(written.message(), HasSubstr("wants a password and none was given"));
}

TEST(RedisAuthTest, AWrongPasswordOrUserIsUnauthenticatedNamingTheServerNotThePassword) {
  LocalRedisServer redis(GranaryAclUser());
  ASSERT_TRUE(redis.ok()) << "redis-server did not start";
  for (const RedisCredentials& wrong :
       {RedisCredentials{"granary", "a wrong password"}, RedisCredentials{"", kPassword},
        RedisCredentials{"nobody", kPassword}}) {
    CacheTierEnv env(Env::Default(), wrong);
    const absl::Status written = Write(env, redis.url() + "/granary/k/0.chunk", "x");
    EXPECT_EQ(written.code(), absl::StatusCode::kUnauthenticated) << written;
    EXPECT_THAT(written.message(), HasSubstr(redis.url()));
    EXPECT_THAT(written.message(), HasSubstr("refused"));
    EXPECT_THAT(written.message(), Not(HasSubstr(wrong.password)));
  }
}

TEST(RedisAuthTest, APasswordInTheUrlIsRefusedWithoutRepeatingIt) {
  LocalRedisServer redis({"--requirepass", kPassword});
  ASSERT_TRUE(redis.ok()) << "redis-server did not start";
  CacheTierEnv env(Env::Default());
  const std::string authority = absl::StrCat("127.0.0.1:", redis.port());
  for (const std::string& userinfo :
       {std::string(":") + kPassword, "granary:" + std::string(kPassword),
        std::string("granary")}) {
    const std::string root = absl::StrCat("redis://", userinfo, "@", authority, "/granary");
    const absl::Status written = Write(env, root + "/k/0.chunk", "x");
    EXPECT_EQ(written.code(), absl::StatusCode::kInvalidArgument) << root;
    EXPECT_THAT(written.message(), HasSubstr("a user or password in the URL is not supported"));
    EXPECT_THAT(written.message(), HasSubstr("--redis_password_file"));
    EXPECT_THAT(written.message(), HasSubstr(authority));
    EXPECT_THAT(written.message(), Not(HasSubstr(kPassword)));
    EXPECT_EQ(RedisAddressOf(RedisServerOf(root)).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(RedisAuthTest, RedissIsRefusedNotWrittenAsALocalFile) {
  // Before, a rediss:// path was not the tier's: it was written as the relative file
  // "rediss:/127.0.0.1:6380/…" of the working directory.
  testing::ScopedTempDir dir;
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(dir.path().c_str()), 0);
  CacheTierEnv env(Env::Default());
  const std::string root = "rediss://127.0.0.1:6380/granary";
  const absl::Status written = Write(env, root + "/k/0.chunk", "x");
  ASSERT_EQ(chdir(cwd), 0);
  EXPECT_EQ(written.code(), absl::StatusCode::kInvalidArgument) << written;
  EXPECT_THAT(written.message(), HasSubstr("rediss:// (Redis over TLS) is not supported"));
  EXPECT_FALSE(Env::Default()->FileExists(dir.Join("rediss:"))) << "written as a relative path";
  EXPECT_EQ(RedisAddressOf(RedisServerOf(root)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RedisAuthTest, RedisAddressOfTakesHostAndPortWithDefault) {
  EXPECT_EQ(*RedisAddressOf("redis://10.0.0.5:7000"), "10.0.0.5:7000");
  EXPECT_EQ(*RedisAddressOf("redis://cache.internal"), "cache.internal:6379");
  for (const std::string bad :
       {"redis://:7000", "redis://h:port", "redis://h:0", "redis://h:70000"}) {
    const absl::StatusOr<std::string> address = RedisAddressOf(bad);
    EXPECT_EQ(address.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace granary
