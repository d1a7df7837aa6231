#include "common/failpoint.h"

#include <cstdlib>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/failpoints.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;

class FailpointTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(ConfigureFailpoints("").ok()); }
};

TEST_F(FailpointTest, DisarmedFailpointsPass) {
  for (const Failpoint* point : kAllFailpoints) EXPECT_TRUE(HitFailpoint(*point).ok());
}

TEST_F(FailpointTest, ErrorFiresOnEveryHitAndNamesTheFailpoint) {
  ASSERT_TRUE(ConfigureFailpoints("put.mid_chunk_write=error").ok());
  for (int i = 0; i < 3; ++i) {
    const absl::Status status = HitFailpoint(kPutMidChunkWrite);
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(status.message(), HasSubstr("put.mid_chunk_write"));
  }
  EXPECT_TRUE(HitFailpoint(kGetMidChunk).ok()) << "only the armed failpoint fires";
}

TEST_F(FailpointTest, AfterFiresExactlyOnceOnTheNthHit) {
  ASSERT_TRUE(ConfigureFailpoints("get.mid_chunk=after(3):error").ok());
  std::vector<bool> fired;
  for (int i = 0; i < 6; ++i) fired.push_back(!HitFailpoint(kGetMidChunk).ok());
  EXPECT_EQ(fired, (std::vector<bool>{false, false, true, false, false, false}));
}

TEST_F(FailpointTest, ReconfiguringResetsHitCounts) {
  ASSERT_TRUE(ConfigureFailpoints("get.mid_chunk=after(2):error").ok());
  EXPECT_TRUE(HitFailpoint(kGetMidChunk).ok());
  ASSERT_TRUE(ConfigureFailpoints("get.mid_chunk=after(2):error").ok());
  EXPECT_TRUE(HitFailpoint(kGetMidChunk).ok());
  EXPECT_FALSE(HitFailpoint(kGetMidChunk).ok());
}

TEST_F(FailpointTest, DelaySleepsAndPasses) {
  ASSERT_TRUE(ConfigureFailpoints("worker.after_produce_before_send=delay(50)").ok());
  const absl::Time start = absl::Now();
  EXPECT_TRUE(HitFailpoint(kWorkerAfterProduceBeforeSend).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
}

TEST_F(FailpointTest, CrashExitsAtOnceWithTheCrashCodeAndSaysWhere) {
  EXPECT_EXIT(
      {
        if (!ConfigureFailpoints("journal.mid_group_commit=after(2):crash").ok()) std::exit(1);
        HitFailpoint(kJournalMidGroupCommit).IgnoreError();
        HitFailpoint(kJournalMidGroupCommit).IgnoreError();
        std::exit(0);  // Not reached when the second hit crashes.
      },
      ::testing::ExitedWithCode(kFailpointCrashExitCode),
      "granary failpoint journal.mid_group_commit fired: crash \\(hit 2\\)");
}

TEST_F(FailpointTest, BadSpecsAreRefusedByEntryAndLeaveTheArmedSetAlone) {
  ASSERT_TRUE(ConfigureFailpoints("get.mid_chunk=error").ok());
  const struct {
    const char* spec;
    const char* says;
  } cases[] = {
      {"no.such.point=crash", "unknown failpoint 'no.such.point'"},
      {"get.mid_chunk", "expected name=action"},
      {"get.mid_chunk=explode", "unknown action 'explode'"},
      {"get.mid_chunk=after(0):crash", "after(N):action with N >= 1"},
      {"get.mid_chunk=after(2)crash", "after(N):action"},
      {"get.mid_chunk=delay(x)", "unknown action 'delay(x)'"},
      {"get.mid_chunk=crash,put.mid_chunk_write=nope", "'put.mid_chunk_write=nope'"},
  };
  for (const auto& c : cases) {
    const absl::Status status = ConfigureFailpoints(c.spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.spec;
    EXPECT_THAT(status.message(), HasSubstr(c.says)) << c.spec;
  }
  EXPECT_FALSE(HitFailpoint(kGetMidChunk).ok()) << "the earlier arming still holds";
}

TEST_F(FailpointTest, EnvironmentErrorsNameTheVariable) {
  ASSERT_EQ(::setenv(kFailpointsEnvironmentVariable, "nonsense", 1), 0);
  const absl::Status status = ConfigureFailpointsFromEnvironment();
  ::unsetenv(kFailpointsEnvironmentVariable);
  EXPECT_THAT(status.message(), HasSubstr("GRANARY_FAILPOINTS: failpoint entry 'nonsense'"));
}

TEST_F(FailpointTest, CheckingASpecArmsNothing) {
  EXPECT_TRUE(CheckFailpointSpec("get.mid_chunk=error").ok());
  EXPECT_TRUE(HitFailpoint(kGetMidChunk).ok());
  EXPECT_THAT(CheckFailpointSpec("get.mid_chunk=boom").message(), HasSubstr("'boom'"));
}

TEST_F(FailpointTest, EnvironmentArmsFailpoints) {
  ASSERT_EQ(::setenv(kFailpointsEnvironmentVariable, "checkpoint.after_write_before_rename=error",
                     1),
            0);
  const absl::Status status = ConfigureFailpointsFromEnvironment();
  ::unsetenv(kFailpointsEnvironmentVariable);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_FALSE(HitFailpoint(kCheckpointAfterWriteBeforeRename).ok());
}

TEST_F(FailpointTest, CatalogueNamesAreUniqueAndDescribed) {
  std::set<std::string> names;
  for (const Failpoint* point : kAllFailpoints) {
    EXPECT_TRUE(names.insert(point->name).second) << point->name;
    EXPECT_GT(std::string(point->where).size(), 10u) << point->name;
  }
  EXPECT_EQ(names.size(), std::size(kAllFailpoints));  // none listed twice
}

}  // namespace
}  // namespace granary
