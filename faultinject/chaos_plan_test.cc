// MakeChaosPlan's replicated scenarios (issue 32) and those of issue 33: their shape, their seeded
// choices, and that a plan is a pure function of its inputs. Each expectation over many seeds names
// the seed.
#include "faultinject/chaos_plan.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
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

// The network scenarios (issue 33): one disruption mid-epoch, then the heal of everything after
// a seeded delay.
TEST(ChaosPlanTest, TheNetworkScenariosDisruptMidEpochThenHealAfterASeededDelay) {
  const std::vector<std::string> network = {"partition_worker", "partition_client",
                                            "partition_oneway", "partition_dispatcher",
                                            "bandwidth"};
  for (const std::string& scenario : network) {
    EXPECT_NE(std::find(ChaosScenarios().begin(), ChaosScenarios().end(), scenario),
              ChaosScenarios().end())
        << scenario;
    EXPECT_TRUE(IsNetworkScenario(scenario)) << scenario;
    for (uint64_t seed = 0; seed < 100; ++seed) {
      const std::string context = absl::StrCat(scenario, " seed ", seed);
      const ChaosPlan plan = Plan(scenario, seed);
      EXPECT_EQ(Described(plan), Described(Plan(scenario, seed))) << context;
      ASSERT_EQ(plan.faults.size(), 2u) << context;
      const ChaosFault& disruption = plan.faults[0];
      EXPECT_LE(disruption.epoch, kEpochs - 2) << context;
      EXPECT_GE(disruption.rows, kRows * 15 / 100) << context;
      EXPECT_LE(disruption.rows, kRows * 65 / 100) << context;
      EXPECT_TRUE(disruption.victims.empty()) << context;
      ASSERT_TRUE(disruption.network.has_value()) << context;
      const NetworkFault& net = *disruption.network;
      const ChaosFault& heal = plan.faults[1];
      EXPECT_TRUE(heal.after_previous) << context;
      ASSERT_TRUE(heal.network.has_value()) << context;
      EXPECT_EQ(heal.network->kind, NetworkFault::Kind::kHeal) << context;
      EXPECT_THAT(heal.Describe(), HasSubstr("ms after the previous fault: heal the network"))
          << context;
      EXPECT_GE(heal.after_ms, 500) << context;
      EXPECT_LE(heal.after_ms, 5000) << context;
      if (scenario == "bandwidth") {
        EXPECT_EQ(net.kind, NetworkFault::Kind::kLimit) << context;
        EXPECT_GE(net.kbit_per_second, 2000) << context;
        EXPECT_LE(net.kbit_per_second, 20000) << context;
        EXPECT_THAT(disruption.Describe(), HasSubstr("'s link to ")) << context;
        continue;
      }
      EXPECT_EQ(net.kind, NetworkFault::Kind::kCut) << context;
      EXPECT_EQ(net.one_way, scenario == "partition_oneway") << context;
      EXPECT_EQ(std::find(net.to.begin(), net.to.end(), net.from), net.to.end()) << context;
      if (scenario == "partition_worker") {
        EXPECT_THAT(net.from, ::testing::StartsWith("worker-")) << context;
        EXPECT_THAT(net.to, ElementsAre("dispatcher")) << context;
        EXPECT_TRUE(net.silent) << context;
        EXPECT_GT(heal.after_ms, 1000) << context << ": outlasts --worker_timeout_ms";
      } else if (scenario == "partition_client") {
        EXPECT_EQ(net.from, "client") << context;
        EXPECT_THAT(net.to, ElementsAre(::testing::StartsWith("worker-"))) << context;
      } else if (scenario == "partition_dispatcher") {
        EXPECT_EQ(net.from, "dispatcher") << context;
        EXPECT_THAT(net.to, ElementsAre("worker-0", "worker-1", "client")) << context;
      } else {
        EXPECT_EQ(net.to.size(), 1u) << context;
        EXPECT_TRUE(net.silent) << context;
        EXPECT_THAT(disruption.Describe(), HasSubstr("(one way)")) << context;
      }
    }
  }
  EXPECT_FALSE(IsNetworkScenario("random"));
}

// The disk scenarios (issue 33): one fault mid-epoch on a seeded target, then its heal after a
// seeded delay; the seed covers every target, and each plan is a pure function of the seed.
TEST(ChaosPlanTest, DiskScenariosStrikeASeededTargetMidEpochThenHealIt) {
  for (const char* scenario : {"disk_full", "disk_eio", "disk_stall"}) {
    std::set<std::string> targets;
    for (uint64_t seed = 0; seed < 100; ++seed) {
      const std::string context = absl::StrCat(scenario, " seed ", seed);
      const ChaosPlan plan = Plan(scenario, seed);
      EXPECT_EQ(Described(plan), Described(Plan(scenario, seed))) << context;
      ASSERT_EQ(plan.faults.size(), 2u) << context;
      const ChaosFault& fault = plan.faults[0];
      ASSERT_TRUE(fault.disk.has_value()) << context;
      EXPECT_FALSE(fault.after_previous) << context;
      EXPECT_GE(fault.rows, kRows * 15 / 100) << context;
      EXPECT_LE(fault.rows, kRows * 65 / 100) << context;
      const ChaosDiskFault& disk = *fault.disk;
      targets.insert(disk.target);
      if (disk.target == "journal") {
        EXPECT_EQ(disk.process, std::string(scenario) == "disk_full" ? "" : "dispatcher")
            << context;
      }
      if (disk.target == "cache") {
        EXPECT_NE(plan.cache_policy, CACHE_COMPUTE) << context;
        // Epoch 0 writes the cache; only later epochs read it.
        EXPECT_EQ(fault.epoch == 0, disk.op != DiskOp::kRead) << context;
      }
      const ChaosFault& heal = plan.faults[1];
      EXPECT_TRUE(heal.after_previous) << context;
      ASSERT_TRUE(heal.disk.has_value()) << context;
      EXPECT_EQ(heal.disk->kind, ChaosDiskFault::Kind::kHeal) << context;
      EXPECT_EQ(heal.disk->target, disk.target) << context;
      EXPECT_EQ(heal.disk->process, disk.process) << context;
      EXPECT_THAT(heal.Describe(), HasSubstr("heal the disk of the " + disk.target)) << context;
    }
    EXPECT_THAT(targets, ElementsAre("cache", "checkpoints", "journal")) << scenario;
  }
}

TEST(ChaosPlanTest, DiskFaultsSayWhatTheyDo) {
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const std::string context = absl::StrCat("seed ", seed);
    const ChaosFault full = Plan("disk_full", seed).faults[0];
    EXPECT_EQ(full.disk->kind, ChaosDiskFault::Kind::kFull) << context;
    EXPECT_THAT(full.Describe(),
                HasSubstr("fill the tmpfs of the " + full.disk->target + " up (ENOSPC)"))
        << context;

    const ChaosPlan eio = Plan("disk_eio", seed);
    const ChaosDiskFault& disk = *eio.faults[0].disk;
    EXPECT_EQ(disk.kind, ChaosDiskFault::Kind::kEio) << context;
    EXPECT_THAT(eio.faults[0].Describe(),
                HasSubstr(absl::StrCat("EIO on every ", DiskOpName(disk.op), " of ", disk.process,
                                       " in the ", disk.target)))
        << context;
    if (disk.target == "journal") {
      // A failed journal write stops the dispatcher changing state until it is restarted.
      EXPECT_NE(disk.op, DiskOp::kRead) << context;
      EXPECT_THAT(eio.faults[1].victims, ElementsAre("dispatcher")) << context;
      EXPECT_THAT(eio.faults[1].Describe(), HasSubstr(", then SIGKILL dispatcher, restart"))
          << context;
    } else if (disk.target == "checkpoints" && disk.op == DiskOp::kRead) {
      // Only a starting task reads checkpoints.
      EXPECT_THAT(eio.faults[0].victims, ElementsAre(disk.process)) << context;
    } else {
      EXPECT_TRUE(eio.faults[0].victims.empty()) << context;
      EXPECT_TRUE(eio.faults[1].victims.empty()) << context;
    }

    const ChaosPlan stall = Plan("disk_stall", seed);
    EXPECT_EQ(stall.faults[0].disk->kind, ChaosDiskFault::Kind::kStall) << context;
    EXPECT_EQ(stall.faults[0].disk->op, DiskOp::kSync) << context;
    EXPECT_GE(stall.faults[0].disk->stall_ms, 1000) << context;
    EXPECT_LE(stall.faults[0].disk->stall_ms, 5000) << context;
    EXPECT_THAT(stall.faults[0].Describe(),
                HasSubstr(absl::StrCat(" stalls ", stall.faults[0].disk->stall_ms, " ms")))
        << context;
  }
}

TEST(ChaosPlanTest, DiskScenariosNeedTwoEpochs) {
  const absl::StatusOr<ChaosPlan> plan = MakeChaosPlan("disk_eio", 1, kWorkers, 1, kRows);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("chaos scenario disk_eio: needs at least 2"));
}

// The power-loss scenarios (issue 33): one fault, a power loss of the dispatcher or one
// worker (powerloss) or of every server (powerloss_all), after a worker's checkpoints, torn in
// some seeds, sometimes again during recovery; each kind occurs among 40 seeds.
TEST(ChaosPlanTest, PowerLossPlansStrikeTheServersTornOrNot) {
  std::map<std::string, std::vector<uint64_t>> seeds_of;  // by kind
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    for (const char* scenario : {"powerloss", "powerloss_all"}) {
      SCOPED_TRACE(absl::StrCat(scenario, " seed ", seed));
      const ChaosPlan plan = Plan(scenario, seed);
      ASSERT_GE(plan.faults.size(), 1u);
      ASSERT_LE(plan.faults.size(), 2u);
      const ChaosFault& fault = plan.faults[0];
      if (plan.faults.size() == 2) {
        const ChaosFault& again = plan.faults[1];
        EXPECT_TRUE(again.during_recovery);
        EXPECT_EQ(again.victims, fault.victims);
        EXPECT_TRUE(again.power_loss.has_value());
        seeds_of["again"].push_back(seed);
      }
      ASSERT_TRUE(fault.power_loss.has_value());
      EXPECT_THAT(fault.checkpointer, ::testing::StartsWith("worker-"));
      EXPECT_GE(fault.checkpoints, 1);
      EXPECT_THAT(fault.Describe(), HasSubstr("power loss of "));
      EXPECT_EQ(fault.power_loss->torn,
                fault.Describe().find(absl::StrCat(
                    ", torn with seed ", fault.power_loss->torn_seed)) != std::string::npos);
      if (std::string(scenario) == "powerloss_all") {
        EXPECT_THAT(fault.victims, ElementsAre("dispatcher", "worker-0", "worker-1"));
        seeds_of[fault.power_loss->torn ? "all torn" : "all"].push_back(seed);
      } else {
        ASSERT_EQ(fault.victims.size(), 1u);
        const bool dispatcher = fault.victims[0] == "dispatcher";
        if (!dispatcher) {
          EXPECT_EQ(fault.victims[0], fault.checkpointer);
        }
        seeds_of[absl::StrCat(dispatcher ? "dispatcher" : "worker",
                              fault.power_loss->torn ? " torn" : "")]
            .push_back(seed);
      }
    }
  }
  for (const char* kind :
       {"dispatcher", "dispatcher torn", "worker", "worker torn", "all", "all torn", "again"}) {
    EXPECT_FALSE(seeds_of[kind].empty()) << kind;
  }
  EXPECT_EQ(Described(Plan("powerloss", 5)), Described(Plan("powerloss", 5)));
}

constexpr const char* kProxyScenarios[] = {"proxy_latency", "proxy_reset", "proxy_halfopen",
                                           "proxy_truncate", "proxy_bandwidth"};

// Each proxy scenario: proxies on, its first fault poisons links mid-epoch, every later fault
// follows the previous one after a delay, and (but for resets) the last heals the same links.
TEST(ChaosPlanTest, AProxyScenarioPoisonsLinksMidEpochThenHealsThemAfterASeededDelay) {
  const std::vector<std::string>& scenarios = ChaosScenarios();
  for (const char* scenario : kProxyScenarios) {
    EXPECT_NE(std::find(scenarios.begin(), scenarios.end(), scenario), scenarios.end()) << scenario;
    for (uint64_t seed = 0; seed < 50; ++seed) {
      const std::string context = absl::StrCat(scenario, " seed ", seed);
      const ChaosPlan plan = Plan(scenario, seed);
      EXPECT_EQ(Described(plan), Described(Plan(scenario, seed))) << context;
      EXPECT_TRUE(plan.proxies) << context;
      EXPECT_EQ(plan.replicas, 0) << context;
      ASSERT_GE(plan.faults.size(), 1u) << context;
      const ChaosFault& first = plan.faults.front();
      EXPECT_FALSE(first.after_previous) << context;
      EXPECT_GE(first.rows, kRows * 15 / 100) << context;
      EXPECT_LE(first.rows, kRows * 65 / 100) << context;
      for (const ChaosFault& fault : plan.faults) {
        ASSERT_TRUE(fault.proxy.has_value()) << context;
        EXPECT_TRUE(fault.victims.empty()) << context;
        EXPECT_FALSE(fault.proxy->links.empty()) << context;
        for (const std::string& link : fault.proxy->links) {
          EXPECT_THAT(link, ::testing::MatchesRegex(
                                "client>dispatcher|worker-[0-9]>dispatcher|client>worker-[0-9]"))
              << context;
        }
        EXPECT_EQ(fault.proxy->links, first.proxy->links) << context;
      }
      for (size_t i = 1; i < plan.faults.size(); ++i) {
        EXPECT_TRUE(plan.faults[i].after_previous) << context;
      }
      if (std::string(scenario) == "proxy_reset") {
        EXPECT_LE(plan.faults.size(), 3u) << context;
        for (const ChaosFault& fault : plan.faults) {
          EXPECT_TRUE(fault.proxy->reset) << context;
          EXPECT_THAT(fault.Describe(), HasSubstr("proxy: reset every connection of ")) << context;
        }
        continue;
      }
      ASSERT_EQ(plan.faults.size(), 2u) << context;
      const ChaosFault& heal = plan.faults[1];
      EXPECT_THAT(heal.Describe(), ::testing::EndsWith("(no toxics)")) << context;
      EXPECT_THAT(first.Describe(), ::testing::Not(HasSubstr("no toxics"))) << context;
      const ProxyFault& poison = *first.proxy;
      if (std::string(scenario) == "proxy_halfopen") {
        // Longer than the dispatcher's worker timeout (1 s), with a standby to fail over to.
        EXPECT_GT(heal.after_ms, 1000) << context;
        EXPECT_EQ(plan.standby, 1) << context;
        EXPECT_TRUE(poison.timeout || poison.to_server.half_open || poison.to_client.half_open)
            << context;
      } else if (std::string(scenario) == "proxy_truncate") {
        const int64_t limit = std::max(poison.to_server.limit_bytes, poison.to_client.limit_bytes);
        EXPECT_GE(limit, 50) << context;
        EXPECT_LE(limit, 3000) << context;
        EXPECT_THAT(first.Describe(), HasSubstr(absl::StrCat("closed after ", limit, " bytes")))
            << context;
      } else if (std::string(scenario) == "proxy_bandwidth") {
        EXPECT_GE(std::max(poison.to_server.bytes_per_second, poison.to_client.bytes_per_second),
                  50000)
            << context;
      } else {
        EXPECT_GE(poison.to_server.latency, absl::Milliseconds(20)) << context;
        EXPECT_THAT(first.Describe(), HasSubstr("latency ")) << context;
      }
    }
  }
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

// equal_shares (issue 34): 2-3 consumers with equal shares, each remainder rule in some seeds,
// random's faults — some striking one consumer alone — in the order they strike, and one
// consumer SIGKILLed late in an epoch (85-98% of its rows), when consumers pad or drop.
TEST(ChaosPlanTest, EqualSharesDrawsConsumersARemainderAndKillsAConsumerLateInAnEpoch) {
  std::set<int> consumer_counts;
  std::set<std::string> remainders;
  int one_consumer_struck = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const ChaosPlan plan = Plan("equal_shares", seed);
    EXPECT_GE(plan.consumers, 2) << "seed " << seed;
    EXPECT_LE(plan.consumers, 3) << "seed " << seed;
    EXPECT_EQ(plan.sharding, "equal") << "seed " << seed;
    consumer_counts.insert(plan.consumers);
    remainders.insert(plan.remainder);
    EXPECT_EQ(Described(plan), Described(Plan("equal_shares", seed))) << "seed " << seed;
    bool late_kill = false;
    const ChaosFault* previous = nullptr;
    for (const ChaosFault& f : plan.faults) {
      if (f.during_recovery) continue;
      if (previous != nullptr) {
        EXPECT_LE(std::make_pair(previous->epoch, previous->rows), std::make_pair(f.epoch, f.rows))
            << "seed " << seed << ": " << f.Describe() << " after " << previous->Describe();
      }
      previous = &f;
      for (const std::string& victim : f.victims) {
        if (victim.rfind("client-", 0) != 0) continue;
        ++one_consumer_struck;
        EXPECT_LT(std::stoi(victim.substr(7)), plan.consumers) << "seed " << seed;
        late_kill = late_kill || (f.rows >= kRows * 85 / 100 && f.rows <= kRows * 98 / 100);
      }
    }
    EXPECT_TRUE(late_kill) << "seed " << seed << ": no consumer killed late in an epoch";
  }
  EXPECT_THAT(consumer_counts, ElementsAre(2, 3));
  EXPECT_THAT(remainders, ElementsAre("drop", "pad", "uneven"));
  EXPECT_GT(one_consumer_struck, 60);  // random's faults strike single consumers too.
  // The other scenarios leave the consumers to the run, and the sharding to `granary run`.
  for (const std::string& name : ChaosScenarios()) {
    if (name == "equal_shares") continue;
    EXPECT_EQ(Plan(name, 7).consumers, 0) << name << " seed 7";
    EXPECT_EQ(Plan(name, 7).sharding, "auto") << name << " seed 7";
  }
}

}  // namespace
}  // namespace granary
