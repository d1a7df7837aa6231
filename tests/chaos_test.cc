// `granary chaos` end to end: every scenario, every failpoint, and a deliberately broken worker
// (DESIGN.md §6). Each run starts a real dispatcher, workers and client as processes on
// 127.0.0.1 and checks every epoch against `granary local`; the seed of each run is in its
// command line, which every failure message prints.
#include <ostream>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/env.h"
#include "common/failpoints.h"
#include "faultinject/chaos_processes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/scoped_temp_dir.h"
#include "tests/run_command.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::RunCommand;

// Runs `granary chaos ARGS` in a scratch directory removed afterwards (a FAIL keeps its files).
CommandResult Chaos(const std::string& args) {
  testing::ScopedTempDir dir;
  return RunCommand(absl::StrCat(GRANARY_BINARY, " chaos --dir ", dir.Join("chaos"), " ", args,
                                 " 2>&1"));
}

// The "k/n faults injected" and "m failpoint firings" counts of a verdict line.
struct Counts {
  int injected = -1, planned = -1, firings = -1;
};
Counts ParseCounts(const std::string& output) {
  Counts c;
  std::smatch m;
  if (std::regex_search(output, m, std::regex(R"((\d+)/(\d+) faults injected, (\d+) failpoint)"))) {
    c.injected = std::stoi(m[1]);
    c.planned = std::stoi(m[2]);
    c.firings = std::stoi(m[3]);
  }
  return c;
}

class ChaosScenarioTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ChaosScenarioTest, EveryEpochExactlyOnceWithEveryPlannedFaultInjected) {
  const std::string args = absl::StrCat("--scenario ", GetParam(), " --seed 11");
  const CommandResult r = Chaos(args);
  EXPECT_EQ(r.exit_code, 0) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr("PASS: granary chaos --scenario " + std::string(GetParam())))
      << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 epochs, 1536 rows verified")) << r.output;
  const Counts counts = ParseCounts(r.output);
  EXPECT_EQ(counts.injected, counts.planned) << "granary chaos " << args << ":\n" << r.output;
  if (std::string(GetParam()) != "nofail") {
    EXPECT_GE(counts.planned, 1) << "granary chaos " << args << ":\n" << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ChaosScenarioTest,
                         ::testing::Values("nofail", "recover", "failover", "killall", "dispatcher",
                                           "putfail", "getfail", "scale", "random"));

// The replicated dispatcher's scenarios (issue 32), each with 2 seeds: the leader — asked for
// when the fault strikes — SIGKILLed (seed 1: started again once another replica leads; seed 3:
// left dead) or cut from etcd but not from workers and client (seeds 1 and 2: healed 1.2 s and
// 4 s after the cut). Another replica must lead, the revived or healed one rejoin as a follower,
// and every epoch be exactly once.
struct ReplicatedCase {
  const char* scenario;
  int seed;
  bool rejoins;  // whether the plan starts the old leader again or heals it
};

void PrintTo(const ReplicatedCase& c, std::ostream* os) { *os << c.scenario << " " << c.seed; }

class ChaosReplicatedTest : public ::testing::TestWithParam<ReplicatedCase> {};

TEST_P(ChaosReplicatedTest, AnotherReplicaLeadsAndEveryEpochIsExactlyOnce) {
  const ReplicatedCase& c = GetParam();
  const std::string args = absl::StrCat("--scenario ", c.scenario, " --seed ", c.seed);
  const CommandResult r = Chaos(args);
  EXPECT_EQ(r.exit_code, 0) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 dispatcher replicas over 3 etcd members")) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("PASS: granary chaos ", args))) << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 epochs, 1536 rows verified")) << r.output;
  const Counts counts = ParseCounts(r.output);
  EXPECT_EQ(counts.injected, counts.planned) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_EQ(counts.planned, c.rejoins ? 2 : 1) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex(
                            R"(replica-[0-2] leads, [0-9.]+ s after the fault on replica-[0-2])"))
      << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex(R"(the trainer stalled at most [0-9.]+ s)"))
      << r.output;
  if (c.rejoins) {
    EXPECT_THAT(r.output, HasSubstr("rejoined as a follower")) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ChaosReplicatedTest,
                         ::testing::Values(ReplicatedCase{"leader_failover", 1, true},
                                           ReplicatedCase{"leader_failover", 3, false},
                                           ReplicatedCase{"leader_partition", 1, true},
                                           ReplicatedCase{"leader_partition", 2, true}),
                         [](const ::testing::TestParamInfo<ReplicatedCase>& info) {
                           return absl::StrCat(info.param.scenario, "_seed", info.param.seed);
                         });

// The cache scenarios with cache_policy auto (issue 18): the workers are killed while the epoch
// the dispatcher decided to Put writes, or while a later one reads.
class ChaosAutoCacheTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ChaosAutoCacheTest, EveryEpochExactlyOnce) {
  const std::string args = absl::StrCat("--scenario ", GetParam(), " --seed 13 --cache auto");
  const CommandResult r = Chaos(args);
  EXPECT_EQ(r.exit_code, 0) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 epochs, 1536 rows verified")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cache auto")) << r.output;
  const Counts counts = ParseCounts(r.output);
  EXPECT_EQ(counts.injected, counts.planned) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_GE(counts.planned, 1) << "granary chaos " << args << ":\n" << r.output;
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ChaosAutoCacheTest, ::testing::Values("putfail", "getfail"));

// The kill, restart and takeover scenarios over shared memory: every element by segment,
// mapped by the client while workers die under it (issue 14).
class ChaosSharedMemoryTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ChaosSharedMemoryTest, EveryEpochExactlyOnce) {
  const std::string args = absl::StrCat("--scenario ", GetParam(), " --seed 12 --transport shm");
  const CommandResult r = Chaos(args);
  EXPECT_EQ(r.exit_code, 0) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr("--transport shm: 3 epochs, 1536 rows verified")) << r.output;
  const Counts counts = ParseCounts(r.output);
  EXPECT_EQ(counts.injected, counts.planned) << "granary chaos " << args << ":\n" << r.output;
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ChaosSharedMemoryTest,
                         ::testing::Values("recover", "failover", "killall", "random"));

// One failpoint armed in one process; it must fire and the run must still be exactly once.
struct FailpointCase {
  const char* failpoint;
  const char* inject;  // PROCESS:SPEC
  const char* cache;
  const char* scenario = "nofail";  // one that passes the failpoint
};
const FailpointCase kFailpointCases[] = {
    {"journal.after_write_before_apply",
     "dispatcher:journal.after_write_before_apply=after(12):crash", "compute"},
    {"journal.mid_group_commit", "dispatcher:journal.mid_group_commit=after(10):crash", "compute"},
    {"dispatcher.after_lease_before_reply",
     "dispatcher:dispatcher.after_lease_before_reply=after(3):crash", "compute"},
    {"worker.after_produce_before_send",
     "worker-0:worker.after_produce_before_send=after(30):crash", "compute"},
    // The standby resumes the victim's task from its checkpoint.
    {"worker.after_resume_before_serve", "workers:worker.after_resume_before_serve=after(1):crash",
     "compute", "failover"},
    {"checkpoint.after_write_before_rename",
     "workers:checkpoint.after_write_before_rename=after(3):crash", "compute"},
    {"put.after_checkpoint_before_commit",
     "workers:put.after_checkpoint_before_commit=after(2):crash", "full"},
    {"put.mid_chunk_write", "workers:put.mid_chunk_write=after(20):crash", "full"},
    {"get.mid_chunk", "workers:get.mid_chunk=after(20):crash", "at_mark"},
    {"dispatcher.after_scale_before_reply",
     "dispatcher:dispatcher.after_scale_before_reply=after(2):crash", "compute", "scale"},
};

void PrintTo(const FailpointCase& c, std::ostream* os) { *os << c.inject; }

class ChaosFailpointTest : public ::testing::TestWithParam<FailpointCase> {};

TEST_P(ChaosFailpointTest, CrashAtTheFailpointThenExactlyOnce) {
  const std::string args = absl::StrCat("--scenario ", GetParam().scenario, " --seed 5 --cache ",
                                        GetParam().cache, " --inject '", GetParam().inject, "'");
  const CommandResult r = Chaos(args);
  EXPECT_EQ(r.exit_code, 0) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr("crashed at a failpoint: restarting it")) << r.output;
  EXPECT_GE(ParseCounts(r.output).firings, 1) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 epochs, 1536 rows verified")) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Failpoints, ChaosFailpointTest, ::testing::ValuesIn(kFailpointCases),
                         [](const ::testing::TestParamInfo<FailpointCase>& info) {
                           return std::regex_replace(info.param.failpoint, std::regex("[.]"),
                                                     "_");
                         });

TEST(ChaosStartTest, ADispatcherCrashingBeforeItServesIsRestarted) {
  // The first journal record (the cluster's name) is written before the dispatcher serves: a
  // failpoint at hit 1 crashed it at its start, and the harness waited a minute for it, then
  // failed (found by `granary chaos --soak`).
  const std::string args =
      "--scenario nofail --seed 5 --inject 'dispatcher:journal.mid_group_commit=after(1):crash'";
  const CommandResult r = Chaos(args);
  EXPECT_EQ(r.exit_code, 0) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 epochs, 1536 rows verified")) << r.output;
}

TEST(ChaosFailpointCoverageTest, EveryFailpointHasACase) {
  std::set<std::string> covered;
  for (const FailpointCase& c : kFailpointCases) covered.insert(c.failpoint);
  for (const Failpoint* point : kAllFailpoints) EXPECT_TRUE(covered.count(point->name)) << point->name;
}

TEST(ChaosHarnessTest, InjectedErrorsAreRetriedOrSkippedExactlyOnce) {
  // `error` instead of crash: a GetElements answer lost on the way (the client asks again) and
  // every checkpoint write failing (the workers run without checkpoints).
  for (const char* inject : {"worker-1:worker.after_produce_before_send=after(10):error",
                             "workers:checkpoint.after_write_before_rename=error"}) {
    const std::string args = absl::StrCat("--scenario recover --seed 2 --inject '", inject, "'");
    const CommandResult r = Chaos(args);
    EXPECT_EQ(r.exit_code, 0) << "granary chaos " << args << ":\n" << r.output;
    EXPECT_GE(ParseCounts(r.output).firings, 1) << "granary chaos " << args << ":\n" << r.output;
  }
}

TEST(ChaosHarnessTest, ABrokenWorkerMakesTheHarnessFail) {
  // Workers that drop one element after a restore: the harness must see it.
  const std::string args = "--scenario recover --seed 3 --testonly_break_workers";
  const CommandResult r = Chaos(args);
  EXPECT_EQ(r.exit_code, 1) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr("MISMATCH")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("FAIL: granary chaos --scenario recover --seed 3")) << r.output;
  EXPECT_EQ(ParseCounts(r.output).injected, 1) << r.output;
}

TEST(ChaosHarnessTest, BadArgumentsAreNamed) {
  const struct {
    const char* args;
    const char* says;
  } cases[] = {
      {"--scenario nope", "unknown chaos scenario 'nope' (known: nofail, recover"},
      {"--scenario putfail --epochs 1", "putfail: needs at least 2 epochs"},
      {"--inject 'worker-7:get.mid_chunk=crash'", "no process 'worker-7'"},
      {"--inject 'workers:get.mid_chunk=kaboom'", "unknown action 'kaboom'"},
      {"--inject 'workers:no.such=crash'", "unknown failpoint 'no.such'"},
      {"--cache sometimes", "sometimes"},
      {"--soak --scenarios leader_failover,leader", "--scenarios: unknown chaos scenario 'leader'"},
      {"--scenarios leader_failover", "--scenarios is for --soak"},
      // The replicated scenarios have replicas, no "dispatcher".
      {"--scenario leader_failover --inject 'dispatcher:journal.mid_group_commit=crash'",
       "no process 'dispatcher' to arm (replica-0 to replica-2, client"},
  };
  for (const auto& c : cases) {
    const CommandResult r = Chaos(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_THAT(r.output, HasSubstr(c.says)) << c.args << ":\n" << r.output;
  }
  const CommandResult no_colon = Chaos("--inject nonsense");
  EXPECT_EQ(no_colon.exit_code, 2);
  EXPECT_THAT(no_colon.output, HasSubstr("expected PROCESS:SPEC"));
}

TEST(ChaosHarnessTest, FailpointsAreListed) {
  const CommandResult r = Chaos("--failpoints");
  EXPECT_EQ(r.exit_code, 0);
  for (const Failpoint* point : kAllFailpoints) EXPECT_THAT(r.output, HasSubstr(point->name));
}

TEST(ChaosHarnessTest, SoakLoopsRandomRunsAndSummarizes) {
  const CommandResult r = Chaos("--soak --minutes 0.05 --seed 9");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("run 1: granary chaos --scenario")) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("soak: [1-9][0-9]* runs in .* 0 failures"))
      << r.output;
}

// The clock scenarios (issue 33, fault class 4). Wall clocks stepped back minutes through
// libfaketime: clock_step seeds 1 and 3 step a worker's (8 min) and the client's (6 min) back
// mid-epoch;
// leader_clock_step seed 2 cuts the leader from etcd and steps its clock back 339 s 16 ms later —
// it must stop leading once its lease runs out by its steady clock (with the lease measured on
// the wall clock, this case failed: the old leader led on and no replica led alone within 30 s),
// another replica must lead and the healed one rejoin as a follower. Env (steady) clocks skewed: clock_skew seed 1 runs the dispatcher's at
// 0.5x after a jump of 84 s forward, seed 3 a worker's at 0.75x. Every epoch must be exactly
// once.
struct ClockCase {
  const char* scenario;
  int seed;
};

void PrintTo(const ClockCase& c, std::ostream* os) { *os << c.scenario << " " << c.seed; }

class ChaosClockTest : public ::testing::TestWithParam<ClockCase> {};

TEST_P(ChaosClockTest, EveryEpochExactlyOnceAcrossClockFaults) {
  const ClockCase& c = GetParam();
  const std::string scenario = c.scenario;
  if (scenario != "clock_skew" && !Env::Default()->FileExists(kLibfaketimePath)) {
    GTEST_SKIP() << "needs Debian's faketime package (" << kLibfaketimePath << ")";
  }
  const std::string args = absl::StrCat("--scenario ", scenario, " --seed ", c.seed);
  const CommandResult r = Chaos(args);
  EXPECT_EQ(r.exit_code, 0) << "granary chaos " << args << ":\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("PASS: granary chaos ", args))) << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 epochs, 1536 rows verified")) << r.output;
  const Counts counts = ParseCounts(r.output);
  EXPECT_EQ(counts.injected, counts.planned) << "granary chaos " << args << ":\n" << r.output;
  if (scenario == "clock_skew") {
    EXPECT_EQ(counts.planned, 2) << r.output;
    EXPECT_THAT(r.output, ::testing::ContainsRegex(R"(Env \(steady\) clock at [0-9.]+x)"))
        << r.output;
    EXPECT_THAT(r.output, HasSubstr("at 1x")) << r.output;
    return;
  }
  EXPECT_THAT(r.output, ::testing::ContainsRegex(R"(wall clock to -[0-9]+ s off the true time)"))
      << r.output;
  EXPECT_THAT(r.output, HasSubstr("wall clock (back to the true time)")) << r.output;
  if (scenario == "leader_clock_step") {
    EXPECT_EQ(counts.planned, 4) << r.output;
    EXPECT_THAT(r.output, ::testing::ContainsRegex(
                              R"(replica-[0-2] leads, [0-9.]+ s after the fault on replica-[0-2])"))
        << r.output;
    EXPECT_THAT(r.output, HasSubstr("rejoined as a follower")) << r.output;
  } else {
    EXPECT_EQ(counts.planned, 2) << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ChaosClockTest,
                         ::testing::Values(ClockCase{"clock_step", 1}, ClockCase{"clock_step", 3},
                                           ClockCase{"leader_clock_step", 2},
                                           ClockCase{"clock_skew", 1}, ClockCase{"clock_skew", 3}),
                         [](const ::testing::TestParamInfo<ClockCase>& info) {
                           return absl::StrCat(info.param.scenario, "_seed", info.param.seed);
                         });

}  // namespace
}  // namespace granary
