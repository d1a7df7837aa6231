#include "pipeline/core/source.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/sources/builtin_sources.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

SourceInfo TypedSource(const std::string& type) {
  SourceInfo info;
  info.type = type;
  return info;
}

TEST(SourceRegistryTest, FindsWhatWasRegisteredInRegistrationOrder) {
  SourceRegistry registry;
  ASSERT_TRUE(registry.Register(TypedSource("second_source")).ok());
  ASSERT_TRUE(registry.Register(TypedSource("first_source")).ok());
  ASSERT_NE(registry.Find("first_source"), nullptr);
  EXPECT_EQ(registry.Find("first_source")->type, "first_source");
  EXPECT_EQ(registry.Find("third_source"), nullptr);
  EXPECT_THAT(registry.Names(), ElementsAre("second_source", "first_source"));
}

TEST(SourceRegistryTest, RefusesADuplicateTypeNamingIt) {
  SourceRegistry registry;
  ASSERT_TRUE(registry.Register(TypedSource("twice")).ok());
  const absl::Status again = registry.Register(TypedSource("twice"));
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("source 'twice' is already registered"));
  EXPECT_THAT(registry.Names(), ElementsAre("twice"));
}

TEST(SourceRegistryTest, UnknownSourceErrorNamesItTheKnownSourcesAndWhereSourcesAreRegistered) {
  SourceRegistry registry;
  RegisterBuiltinSources(&registry);
  const absl::StatusOr<const SourceInfo*> missing = registry.Get("parquet");
  EXPECT_TRUE(absl::IsInvalidArgument(missing.status())) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()),
              AllOf(HasSubstr("unknown type 'parquet'"), HasSubstr("range, tfrecord"),
                    HasSubstr("pipeline/sources/builtin_sources.h"), HasSubstr("cache/cache_ops.h")));
  const absl::StatusOr<const SourceInfo*> range = registry.Get("range");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ((*range)->type, "range");
}

TEST(SourceRegistryTest, TraitsDeclaredAtRegistrationAreVisible) {
  SourceRegistry registry;
  RegisterBuiltinSources(&registry);
  EXPECT_FALSE(registry.Find("tfrecord")->keeps_provenance);
  EXPECT_FALSE(registry.Find("tfrecord")->reads_cache_chunks);
}

}  // namespace
}  // namespace granary
