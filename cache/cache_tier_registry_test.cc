#include "cache/cache_tier_registry.h"

#include "absl/status/status.h"
#include "cache/cache_tier_env.h"
#include "common/env_wrapper.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An Env of one server of a test tier: says it has exactly the file "<server>/present".
class FakeTierEnv : public EnvWrapper {
 public:
  FakeTierEnv(std::string server, Env* base) : EnvWrapper(base), server_(std::move(server)) {}
  bool FileExists(const std::string& path) override { return path == server_ + "/present"; }

 private:
  const std::string server_;
};

CacheTierRegistry::EnvFactory FakeTier() {
  return [](const std::string& server, Env* base) {
    return std::make_unique<FakeTierEnv>(server, base);
  };
}

TEST(CacheTierRegistryTest, BuiltinsAreRedis) {
  EXPECT_THAT(CacheTierRegistry::WithBuiltins().Schemes(), ElementsAre("redis", "rediss"));
}

TEST(CacheTierRegistryTest, ServerOfNamesOnlyPathsOfRegisteredSchemes) {
  const CacheTierRegistry tiers = CacheTierRegistry::WithBuiltins();
  EXPECT_EQ(tiers.ServerOf("redis://127.0.0.1:6379/cache/key/0.chunk"), "redis://127.0.0.1:6379");
  EXPECT_EQ(tiers.ServerOf("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
  EXPECT_EQ(tiers.ServerOf("/shared/cache/key/0.chunk"), "");
  EXPECT_EQ(tiers.ServerOf("s3://bucket/key"), "");
}

TEST(CacheTierRegistryTest, UnknownSchemeIsRefusedNamingItAndWhereTiersAreRegistered) {
  const CacheTierRegistry tiers = CacheTierRegistry::WithBuiltins();
  const absl::StatusOr<const CacheTierRegistry::EnvFactory*> s3 = tiers.Find("s3");
  EXPECT_TRUE(absl::IsInvalidArgument(s3.status())) << s3.status();
  EXPECT_THAT(std::string(s3.status().message()),
              AllOf(HasSubstr("no cache tier for scheme 's3'"), HasSubstr("redis, rediss"),
                    HasSubstr("cache/cache_tier_registry.h")));
  EXPECT_TRUE(tiers.Find("redis").ok());
}

TEST(CacheTierRegistryTest, DuplicateSchemeIsRefusedNamingIt) {
  CacheTierRegistry tiers = CacheTierRegistry::WithBuiltins();
  const absl::Status again = tiers.Register("redis", FakeTier());
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("scheme 'redis' is already registered"));
}

TEST(CacheTierRegistryTest, CacheTierEnvRoutesARegisteredSchemeToItsTier) {
  CacheTierRegistry tiers;
  ASSERT_TRUE(tiers.Register("fake", FakeTier()).ok());
  CacheTierEnv env(Env::Default(), std::move(tiers));
  EXPECT_TRUE(env.FileExists("fake://one/present"));
  EXPECT_FALSE(env.FileExists("fake://one/absent"));
  EXPECT_FALSE(env.FileExists("/nonexistent/present"));
  const absl::Status rename = env.RenameFile("fake://one/present", "fake://two/present");
  EXPECT_TRUE(absl::IsInvalidArgument(rename)) << rename;
  EXPECT_THAT(std::string(rename.message()), HasSubstr("different cache tiers"));
}

}  // namespace
}  // namespace granary
