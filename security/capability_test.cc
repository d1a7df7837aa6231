#include "security/capability.h"

#include <sys/stat.h>

#include "common/env.h"
#include "common/fault_injection_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

TEST(CapabilityTest, VerifiesOnlyTheScopeItWasMintedFor) {
  testing::ScopedTempDir dir;
  const CapabilityKey key = CapabilityKey::LoadOrCreate(dir.Join("capability.key")).value();
  const CapabilityScope scope{.job_id = 3, .task_id = 17, .consumer = 1, .generation = 2};
  const std::string capability = key.Mint(scope);
  EXPECT_EQ(capability.size(), 32u);
  EXPECT_TRUE(key.Verify(scope, capability));
  for (CapabilityScope other : {CapabilityScope{4, 17, 1, 2}, CapabilityScope{3, 18, 1, 2},
                                CapabilityScope{3, 17, 0, 2}, CapabilityScope{3, 17, 1, 3}}) {
    EXPECT_FALSE(key.Verify(other, capability))
        << other.job_id << " " << other.task_id << " " << other.consumer << " " << other.generation;
  }
  EXPECT_FALSE(key.Verify(scope, ""));
  EXPECT_FALSE(key.Verify(scope, capability.substr(0, 31)));
  std::string flipped = capability;
  flipped[5] ^= 1;
  EXPECT_FALSE(key.Verify(scope, flipped));
}

TEST(CapabilityTest, TheKeyFileIsKeptAcrossRestartsAndPrivate) {
  testing::ScopedTempDir dir;
  const std::string path = dir.Join("capability.key");
  const CapabilityKey first = CapabilityKey::LoadOrCreate(path).value();
  const CapabilityKey again = CapabilityKey::LoadOrCreate(path).value();
  EXPECT_EQ(first.bytes(), again.bytes());
  const CapabilityScope scope{1, 2, 0, 1};
  EXPECT_TRUE(again.Verify(scope, first.Mint(scope)));
  struct stat info;
  ASSERT_EQ(::stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  // Another key (another dispatcher's) does not verify it.
  const CapabilityKey other = CapabilityKey::LoadOrCreate(dir.Join("other.key")).value();
  EXPECT_FALSE(other.Verify(scope, first.Mint(scope)));
  // A worker gets the same key from its bytes.
  EXPECT_TRUE(CapabilityKey::FromBytes(first.bytes()).value().Verify(scope, first.Mint(scope)));
}

// Issue 33's power loss: the new key file's rename must be durable (its directory synced), or
// the next start makes another key and rejects every capability minted before.
TEST(CapabilityTest, ANewKeySurvivesAPowerLoss) {
  testing::ScopedTempDir dir;
  const std::string path = dir.Join("capability.key");
  FaultInjectionEnv env(Env::Default());
  const CapabilityKey first = CapabilityKey::LoadOrCreate(path, &env).value();
  ASSERT_TRUE(env.DropUnsyncedData().ok());
  const CapabilityKey again = CapabilityKey::LoadOrCreate(path).value();
  EXPECT_EQ(first.bytes(), again.bytes());
}

TEST(CapabilityTest, ADamagedKeyFileIsDataLossNamingIt) {
  testing::ScopedTempDir dir;
  const std::string path = dir.Join("capability.key");
  ASSERT_TRUE(WriteStringToFile(Env::Default(), path, "short", false).ok());
  const absl::Status status = CapabilityKey::LoadOrCreate(path).status();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(path + " holds 5 bytes, not 32"));
  EXPECT_TRUE(absl::IsInvalidArgument(CapabilityKey::FromBytes("x").status()));
}

}  // namespace
}  // namespace granary
