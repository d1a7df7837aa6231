#include "pipeline/core/op.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/ops/builtin_ops.h"
#include "pipeline/pipeline.h"

namespace granary {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

OpInfo NamedOp(const std::string& name) {
  OpInfo info;
  info.name = name;
  return info;
}

TEST(OpRegistryTest, FindsWhatWasRegisteredInRegistrationOrder) {
  OpRegistry registry;
  ASSERT_TRUE(registry.Register(NamedOp("second_op")).ok());
  ASSERT_TRUE(registry.Register(NamedOp("first_op")).ok());
  ASSERT_NE(registry.Find("first_op"), nullptr);
  EXPECT_EQ(registry.Find("first_op")->name, "first_op");
  EXPECT_EQ(registry.Find("third_op"), nullptr);
  EXPECT_THAT(registry.Names(), ElementsAre("second_op", "first_op"));
}

TEST(OpRegistryTest, RefusesADuplicateNameNamingIt) {
  OpRegistry registry;
  ASSERT_TRUE(registry.Register(NamedOp("twice")).ok());
  const absl::Status again = registry.Register(NamedOp("twice"));
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("op 'twice' is already registered"));
  EXPECT_THAT(registry.Names(), ElementsAre("twice"));
}

TEST(OpRegistryTest, UnknownOpErrorNamesItTheKnownOpsAndWhereOpsAreRegistered) {
  OpRegistry registry;
  RegisterBuiltinOps(&registry);
  const absl::StatusOr<const OpInfo*> missing = registry.Get("unbatch");
  EXPECT_TRUE(absl::IsInvalidArgument(missing.status())) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()),
              AllOf(HasSubstr("unknown op 'unbatch'"), HasSubstr("map, parallel_map"),
                    HasSubstr("pipeline/ops/builtin_ops.h"), HasSubstr("cache/cache_ops.h")));
  const absl::StatusOr<const OpInfo*> batch = registry.Get("batch");
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ((*batch)->name, "batch");
}

TEST(OpRegistryTest, TraitsDeclaredAtRegistrationAreVisible) {
  OpRegistry registry;
  RegisterBuiltinOps(&registry);
  EXPECT_TRUE(registry.Find("map")->takes_udf);
  EXPECT_TRUE(registry.Find("batch")->batches);
  EXPECT_TRUE(registry.Find("ignore_errors")->follows_udf_op);
  EXPECT_FALSE(registry.Find("map")->inserted_by_service);
}

TEST(OpRegistryTest, OpsInsertedByTheServiceTakeNoUserOpIndex) {
  OpRegistry registry;
  ASSERT_TRUE(registry.Register(NamedOp("user_op")).ok());
  OpInfo inserted = NamedOp("inserted_op");
  inserted.inserted_by_service = true;
  ASSERT_TRUE(registry.Register(inserted).ok());
  PipelineDef def;
  def.set_cached_ops(2);
  for (const char* op : {"user_op", "inserted_op", "user_op"}) def.add_ops()->set_op(op);
  EXPECT_THAT(UserOpIndices(def, registry), ElementsAre(2, 3, 3));
}

}  // namespace
}  // namespace granary
