// MakeChaosPlan's replicated scenarios (issue 32) and clock scenarios (issue 33): their shape,
// their seeded choices, and that a plan is a pure function of its inputs. Each expectation over
// many seeds names the seed.
#include "faultinject/chaos_plan.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kWorkers = 2;
constexpr int64_t kEpochs = 3;
constexpr int64_t kRows = 512;

ChaosPlan Plan(const std::string& scenario, uint64_t seed) {
  absl::StatusOr<ChaosPlan> plan = MakeChaosPlan(scenario, seed, kWorkers, kEpochs, kRows);
  EXPECT_TRUE(plan.ok()) << scenario << " seed " << seed << ": " << plan.status();
  return plan.value_or(ChaosPlan());
}

std::vector<std::string> Described(const ChaosPlan& plan) {
  std::vector<std::string> lines;
  for (const ChaosFault& fault : plan.faults) lines.push_back(fault.Describe());
  return lines;
}

TEST(ChaosPlanTest, TheReplicatedScenariosAreListedForTheSoak) {
  const std::vector<std::string>& scenarios = ChaosScenarios();
  for (const char* name : {"leader_failover", "leader_partition"}) {
    EXPECT_NE(std::find(scenarios.begin(), scenarios.end(), name), scenarios.end()) << name;
    EXPECT_TRUE(IsReplicatedScenario(name)) << name;
  }
  for (const std::string& name : scenarios) {
    if (IsReplicatedScenario(name)) continue;
    EXPECT_EQ(Plan(name, 7).replicas, 0) << name << " seed 7";
  }
}

TEST(ChaosPlanTest, AReplicatedPlanIsAPureFunctionOfTheSeed) {
  for (const char* scenario : {"leader_failover", "leader_partition"}) {
    for (uint64_t seed = 0; seed < 20; ++seed) {
      EXPECT_EQ(Described(Plan(scenario, seed)), Described(Plan(scenario, seed)))
          << scenario << " seed " << seed;
    }
  }
}

// The fault that strikes the leader: mid-epoch, never in the last epoch.
void ExpectMidEpochBeforeTheLast(const ChaosFault& fault, const std::string& context) {
  EXPECT_FALSE(fault.after_new_leader) << context;
  EXPECT_GE(fault.epoch, 0) << context;
  EXPECT_LE(fault.epoch, kEpochs - 2) << context;
  EXPECT_GE(fault.rows, kRows * 15 / 100) << context;
  EXPECT_LE(fault.rows, kRows * 65 / 100) << context;
}

TEST(ChaosPlanTest, LeaderFailoverKillsTheLeaderAndRevivesItOnceAnotherLeadsOrNever) {
  int revived = 0, left_dead = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const std::string context = absl::StrCat("leader_failover seed ", seed);
    const ChaosPlan plan = Plan("leader_failover", seed);
    EXPECT_EQ(plan.replicas, 3) << context;
    ASSERT_GE(plan.faults.size(), 1u) << context;
    ASSERT_LE(plan.faults.size(), 2u) << context;
    const ChaosFault& kill = plan.faults[0];
    ExpectMidEpochBeforeTheLast(kill, context);
    EXPECT_THAT(kill.victims, ElementsAre(kLeader)) << context;
    EXPECT_TRUE(kill.for_good) << context;
    if (plan.faults.size() == 1) {
      ++left_dead;
      continue;
    }
    ++revived;
    const ChaosFault& revive = plan.faults[1];
    EXPECT_TRUE(revive.after_new_leader) << context;
    EXPECT_GE(revive.after_ms, 0) << context;
    EXPECT_LE(revive.after_ms, 3000) << context;
    EXPECT_THAT(revive.revive, ElementsAre(kLeader)) << context;
    EXPECT_TRUE(revive.victims.empty()) << context;
    EXPECT_THAT(revive.Describe(), HasSubstr("start the leader again")) << context;
  }
  // The seed decides between the two (30% left dead).
  EXPECT_GT(revived, 100);
  EXPECT_GT(left_dead, 30);
}

TEST(ChaosPlanTest, LeaderPartitionCutsTheLeaderFromEtcdThenHealsItAfterASeededDelay) {
  int64_t shortest = 1 << 30, longest = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const std::string context = absl::StrCat("leader_partition seed ", seed);
    const ChaosPlan plan = Plan("leader_partition", seed);
    EXPECT_EQ(plan.replicas, 3) << context;
    ASSERT_EQ(plan.faults.size(), 2u) << context;
    const ChaosFault& cut = plan.faults[0];
    ExpectMidEpochBeforeTheLast(cut, context);
    EXPECT_TRUE(cut.cut_leader) << context;
    EXPECT_TRUE(cut.victims.empty()) << context;
    EXPECT_THAT(cut.Describe(), HasSubstr("cut the leader from every etcd member")) << context;
    const ChaosFault& heal = plan.faults[1];
    EXPECT_TRUE(heal.after_new_leader) << context;
    EXPECT_TRUE(heal.heal_cut) << context;
    EXPECT_GE(heal.after_ms, 1000) << context;
    EXPECT_LE(heal.after_ms, 4000) << context;
    shortest = std::min(shortest, heal.after_ms);
    longest = std::max(longest, heal.after_ms);
  }
  EXPECT_LT(shortest, 1500);
  EXPECT_GT(longest, 3500);
}

TEST(ChaosPlanTest, AReplicatedScenarioOfOneEpochStrikesInIt) {
  const absl::StatusOr<ChaosPlan> plan = MakeChaosPlan("leader_partition", 4, kWorkers, 1, kRows);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->faults[0].epoch, 0);
}

TEST(ChaosPlanTest, AnUnknownScenarioNamesTheReplicatedOnes) {
  const absl::StatusOr<ChaosPlan> plan = MakeChaosPlan("leader", 1, kWorkers, kEpochs, kRows);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("unknown chaos scenario 'leader'"));
  EXPECT_THAT(plan.status().message(), HasSubstr("leader_failover, leader_partition"));
}

TEST(ChaosPlanTest, ClockStepStepsOneProcessesWallClockBackMidEpochAndHealsIt) {
  std::set<std::string> stepped;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const std::string context = absl::StrCat("clock_step seed ", seed);
    const ChaosPlan plan = Plan("clock_step", seed);
    EXPECT_EQ(plan.replicas, 0) << context;
    ASSERT_EQ(plan.faults.size(), 2u) << context;
    const ChaosFault& step = plan.faults[0];
    ASSERT_TRUE(step.clock.has_value()) << context;
    EXPECT_FALSE(step.after_previous) << context;
    EXPECT_GE(step.rows, kRows * 15 / 100) << context;
    EXPECT_LE(step.rows, kRows * 65 / 100) << context;
    EXPECT_TRUE(step.victims.empty()) << context;
    EXPECT_GE(step.clock->wall_offset_seconds, -600) << context;
    EXPECT_LE(step.clock->wall_offset_seconds, -60) << context;
    EXPECT_THAT(step.Describe(),
                HasSubstr(absl::StrCat(step.clock->process, "'s wall clock to ",
                                       step.clock->wall_offset_seconds, " s off the true time")))
        << context;
    stepped.insert(step.clock->process);
    const ChaosFault& heal = plan.faults[1];
    ASSERT_TRUE(heal.clock.has_value()) << context;
    EXPECT_TRUE(heal.after_previous) << context;
    EXPECT_GE(heal.after_ms, 1000) << context;
    EXPECT_LE(heal.after_ms, 4000) << context;
    EXPECT_EQ(heal.clock->process, step.clock->process) << context;
    EXPECT_EQ(heal.clock->wall_offset_seconds, 0) << context;
    EXPECT_THAT(heal.Describe(), HasSubstr("heal " + step.clock->process + "'s wall clock"))
        << context;
  }
  // The seed picks the dispatcher, the client or any worker.
  EXPECT_THAT(stepped, ElementsAre("client", "dispatcher", "worker-0", "worker-1"));
}

TEST(ChaosPlanTest, LeaderClockStepCutsTheLeaderStepsItsClockBackThenHealsBoth) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const std::string context = absl::StrCat("leader_clock_step seed ", seed);
    const ChaosPlan plan = Plan("leader_clock_step", seed);
    EXPECT_EQ(plan.replicas, 3) << context;
    EXPECT_TRUE(StepsWallClocks(plan.scenario)) << context;
    ASSERT_EQ(plan.faults.size(), 4u) << context;
    ExpectMidEpochBeforeTheLast(plan.faults[0], context);
    EXPECT_TRUE(plan.faults[0].cut_leader) << context;
    const ChaosFault& step = plan.faults[1];
    EXPECT_TRUE(step.after_previous) << context;
    EXPECT_LE(step.after_ms, 300) << context;
    ASSERT_TRUE(step.clock.has_value()) << context;
    EXPECT_EQ(step.clock->process, kLeader) << context;
    EXPECT_LE(step.clock->wall_offset_seconds, -60) << context;
    EXPECT_THAT(step.Describe(), HasSubstr("step the leader's wall clock to -")) << context;
    EXPECT_TRUE(plan.faults[2].after_new_leader) << context;
    EXPECT_TRUE(plan.faults[2].heal_cut) << context;
    const ChaosFault& heal = plan.faults[3];
    EXPECT_TRUE(heal.after_previous) << context;
    ASSERT_TRUE(heal.clock.has_value()) << context;
    EXPECT_EQ(heal.clock->process, kLeader) << context;
    EXPECT_EQ(heal.clock->wall_offset_seconds, 0) << context;
  }
}

}  // namespace
}  // namespace granary
