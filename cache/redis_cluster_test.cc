// The in-memory tier on a Redis Cluster (cache/redis_nodes.h): a real three-master cluster of
// redis-server on loopback, resharded under the client's feet.
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cache/cache_put.h"
#include "cache/cache_tier_env.h"
#include "cache/redis_env.h"
#include "cache/redis_nodes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hiredis/hiredis.h"
#include "testing/redis_test_cluster.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::ElementsAre;

absl::Status Write(Env& env, const std::string& path, const std::string& data) {
  absl::StatusOr<std::unique_ptr<WritableFile>> file = env.NewWritableFile(path);
  if (!file.ok()) return file.status();
  if (absl::Status s = (*file)->Append(data); !s.ok()) return s;
  return (*file)->Close();
}

// `size` bytes that differ with `seed`.
std::string Bytes(size_t size, int seed) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 31 + seed);
  return bytes;
}

// Every node of `cluster` holds some of the values `written` (path -> bytes), and each path
// reads back its bytes through `env`.
void ExpectSpreadAndReadBack(testing::RedisTestCluster& cluster, Env& env,
                             const std::map<std::string, std::string>& written) {
  for (int node = 0; node < cluster.size(); ++node) {
    EXPECT_GT(cluster.KeysOn(node), 0) << "no chunk on node " << node;
  }
  for (const auto& [path, bytes] : written) {
    absl::StatusOr<std::string> read = ReadFileToString(&env, path);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(*read == bytes) << path << " reads back different bytes";
  }
}

class RedisClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cluster_.ok()) << "the Redis Cluster did not form"; }

  int SlotOfPath(const std::string& path) {
    absl::StatusOr<std::string> key = redis_.KeyOf(path);
    EXPECT_TRUE(key.ok()) << key.status();
    return RedisNodes::SlotOf(key.value_or(""));
  }

  testing::ScopedTempDir dir_;
  testing::RedisTestCluster cluster_{{.masters = 3}, dir_.path()};
  RedisEnv redis_{cluster_.url(), Env::Default()};
};

TEST_F(RedisClusterTest, SlotOfAgreesWithTheServersKeyslot) {
  // The Redis Cluster specification's check value: CRC16("123456789") = 0x31C3.
  EXPECT_EQ(RedisNodes::SlotOf("123456789"), 0x31C3);
  absl::StatusOr<std::unique_ptr<RedisConnection>> node =
      RedisConnection::Open(cluster_.url().substr(sizeof("redis://") - 1));
  ASSERT_TRUE(node.ok()) << node.status();
  const std::vector<std::string> keys = {
      "foo",    "{user1000}.following",  "{}empty-tag",
      "a{}{b}", "{a/b/t1-g0-i0}-r7.tmp", std::string("\xff\x00\x80", 3)};
  for (const std::string& key : keys) {
    absl::StatusOr<RedisReply> slot = (*node)->Command({"CLUSTER", "KEYSLOT", key});
    ASSERT_TRUE(slot.ok()) << slot.status();
    EXPECT_EQ(RedisNodes::SlotOf(key), (*slot)->integer) << "key '" << key << "'";
  }
}

// A cache's worth of chunks written the way CachePut writes them (temporary, then renamed to
// the committed name): they spread over every master, read back byte for byte, list as a
// directory, and the directory renames (across slots) and empties like one.
TEST_F(RedisClusterTest, ChunksSpreadOverEveryMasterAndWorkAsFiles) {
  CacheTierEnv env(Env::Default());
  const std::string dir = cluster_.url() + "/granary/0123abcd";
  std::map<std::string, std::string> written;
  for (int task = 0; task < 12; ++task) {
    const std::string temporary = dir + "/" + CachePut::TemporaryName(task, 0, 0, "00ff");
    const std::string committed = dir + "/" + CachePut::FinalName(task, 0, 0, 5);
    ASSERT_EQ(SlotOfPath(temporary), SlotOfPath(committed)) << "the commit's RENAME crosses slots";
    written[committed] = Bytes((task + 1) * 70000, task);
    ASSERT_TRUE(Write(env, temporary, written[committed]).ok());
    const absl::Status renamed = env.RenameFile(temporary, committed);
    ASSERT_TRUE(renamed.ok()) << renamed;
  }
  ExpectSpreadAndReadBack(cluster_, env, written);
  absl::StatusOr<std::vector<std::string>> children = env.GetChildren(dir);
  ASSERT_TRUE(children.ok()) << children.status();
  EXPECT_EQ(children->size(), written.size());
  EXPECT_THAT(*env.GetChildren(cluster_.url() + "/granary"), ElementsAre("0123abcd"));
  const std::string evicted = cluster_.url() + "/granary/evicted-0123abcd-1";
  ASSERT_TRUE(env.RenameFile(dir, evicted).ok());
  EXPECT_FALSE(env.FileExists(dir));
  for (const auto& [path, bytes] : written) {
    const std::string moved = evicted + path.substr(dir.size());
    EXPECT_TRUE(*ReadFileToString(&env, moved) == bytes) << moved;
    ASSERT_TRUE(env.DeleteFile(moved).ok());
  }
  EXPECT_TRUE(env.DeleteDir(evicted).ok());
  for (int node = 0; node < cluster_.size(); ++node) EXPECT_EQ(cluster_.KeysOn(node), 0);
}

// A slot resharded to another master after the client learnt the map: the client meets MOVED,
// learns the new owner and reads and writes there.
TEST_F(RedisClusterTest, AMovedSlotIsFollowed) {
  const std::string path = cluster_.url() + "/granary/k/t3-g0-i0-n5.chunk";
  ASSERT_TRUE(redis_.Put(path, "before the move").ok());
  const int slot = SlotOfPath(path);
  const int owner = cluster_.OwnerOf(slot);
  const int to = (owner + 1) % cluster_.size();
  ASSERT_TRUE(cluster_.MoveSlot(slot, to, /*finish=*/true));
  ASSERT_EQ(cluster_.OwnerOf(slot), to);
  absl::StatusOr<std::string> read = ReadFileToString(&redis_, path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "before the move");
  ASSERT_TRUE(redis_.Put(path, "after the move").ok());
  EXPECT_EQ(*ReadFileToString(&redis_, path), "after the move");
  EXPECT_EQ(cluster_.KeysOn(owner), 0);
  EXPECT_EQ(cluster_.KeysOn(to), 1);
}

// Mid-migration (keys moved, the slot still the old owner's) the old owner answers ASK: the
// client reads the moved value and writes a new one at the target. Its commit (a RENAME: two
// keys) is refused with TRYAGAIN until the migration ends; the client waits it out and commits.
TEST_F(RedisClusterTest, AMigratingSlotsAskIsFollowedAndACommitWaitsForTheMigration) {
  const std::string dir = cluster_.url() + "/granary/k";
  const std::string first = dir + "/t4-g0-i0-n5.chunk";
  const std::string moved = Bytes((11 << 20) / 2, 4);  // more pieces than a read's window
  ASSERT_TRUE(redis_.Put(first, moved).ok());
  const int slot = SlotOfPath(first);
  const int owner = cluster_.OwnerOf(slot);
  const int to = (owner + 1) % cluster_.size();
  ASSERT_TRUE(cluster_.MoveSlot(slot, to, /*finish=*/false));
  ASSERT_EQ(cluster_.OwnerOf(slot), owner) << "the migration finished";
  absl::StatusOr<std::string> read = ReadFileToString(&redis_, first);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == moved) << "the moved value reads back different bytes";
  const std::string temporary = dir + "/t4-g0-i0-r00ff.tmp";
  ASSERT_TRUE(redis_.Put(temporary, "new").ok());
  EXPECT_EQ(cluster_.KeysOn(to), 2) << "the new value is not at the migration's target";
  const absl::Time start = absl::Now();
  std::thread finish([&] {
    absl::SleepFor(absl::Seconds(1));
    EXPECT_TRUE(cluster_.MoveSlot(slot, to, /*finish=*/true));
  });
  const std::string committed = dir + "/t4-g0-i0-n1.chunk";
  const absl::Status renamed = redis_.RenameFile(temporary, committed);
  finish.join();
  ASSERT_TRUE(renamed.ok()) << renamed;
  EXPECT_GE(absl::Now() - start, absl::Seconds(1)) << "committed while the slot migrated";
  EXPECT_EQ(*ReadFileToString(&redis_, committed), "new");
  EXPECT_EQ(cluster_.KeysOn(owner), 0);
  EXPECT_EQ(cluster_.KeysOn(to), 2);
}

// A master SIGKILLed: its replica takes over once the cluster's node timeout has passed. The
// client waits the failover out and reads every value (written and replicated before the kill)
// from the promoted replica, and writes there.
TEST(RedisClusterFailoverTest, AKilledMastersValuesAreReadFromItsPromotedReplica) {
  testing::ScopedTempDir dir;
  testing::RedisTestCluster cluster(
      {.masters = 3, .replicas_per_master = 1, .node_timeout_ms = 1000}, dir.path());
  ASSERT_TRUE(cluster.ok()) << "the Redis Cluster did not form";
  RedisEnv redis(cluster.url(), Env::Default());
  std::map<std::string, std::string> written;
  for (int task = 0; task < 30; ++task) {
    const std::string path =
        absl::StrCat(cluster.url(), "/granary/k/", CachePut::FinalName(task, 0, 0, 1));
    written[path] = Bytes(3 << 20, task);  // a few pieces each
    ASSERT_TRUE(redis.Put(path, written[path]).ok());
  }
  for (int master = 0; master < 3; ++master) ASSERT_TRUE(cluster.AwaitReplicated(master));
  const int killed = 1;
  const int promoted = 3 + killed;
  ASSERT_GT(cluster.KeysOn(killed), 0) << "no value on the master to kill";
  cluster.Kill(killed);
  const absl::Time start = absl::Now();
  // A listing waits the failover out too (its SCAN of the killed master restarts).
  absl::StatusOr<std::vector<std::string>> children =
      redis.GetChildren(cluster.url() + "/granary/k");
  ASSERT_TRUE(children.ok()) << children.status();
  EXPECT_EQ(children->size(), written.size());
  for (const auto& [path, bytes] : written) {
    absl::StatusOr<std::string> read = ReadFileToString(&redis, path);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(*read == bytes) << path << " reads back different bytes";
  }
  EXPECT_LT(absl::Now() - start, RedisNodes::kBusyWait);
  const std::string after = cluster.url() + "/granary/k/after-failover";
  for (int task = 0; task < 30; ++task) {
    const std::string path = absl::StrCat(after, task);
    ASSERT_TRUE(redis.Put(path, "x").ok());
    EXPECT_EQ(*ReadFileToString(&redis, path), "x");
  }
  int promoted_slots = 0;
  for (int slot = 0; slot < RedisNodes::kSlots; slot += 97) {
    if (cluster.OwnerOf(slot) == promoted) ++promoted_slots;
  }
  EXPECT_GT(promoted_slots, 0) << "the replica of the killed master serves no slot";
}

// A cluster whose nodes ask for a password: every node the client is routed to (each master
// of a cache's chunks) is reached authenticated; without the password the first node refuses.
TEST(RedisClusterAuthTest, EveryNodeOfAPasswordProtectedClusterIsReachedAuthenticated) {
  testing::ScopedTempDir dir;
  const std::string password = "cluster secret of the test";
  testing::RedisTestCluster cluster({.masters = 3, .password = password}, dir.path());
  ASSERT_TRUE(cluster.ok()) << "the Redis Cluster did not form";
  CacheTierEnv env(Env::Default(), {.user = "", .password = password});
  std::map<std::string, std::string> written;
  for (int task = 0; task < 12; ++task) {
    const std::string path =
        cluster.url() + "/granary/0123abcd/" + CachePut::FinalName(task, 0, 0, 5);
    written[path] = Bytes(70000, task);
    const absl::Status put = Write(env, path, written[path]);
    ASSERT_TRUE(put.ok()) << put;
  }
  ExpectSpreadAndReadBack(cluster, env, written);
  CacheTierEnv without_password(Env::Default());
  const absl::Status refused = Write(without_password, cluster.url() + "/granary/x/0.chunk", "x");
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated) << refused;
  EXPECT_THAT(refused.message(), ::testing::HasSubstr(cluster.url()));
}

}  // namespace
}  // namespace granary
