// granary chaos: the fault-injection harness (faultinject/chaos_harness.h). One scenario run,
// a soak of random runs (--soak --minutes M), or the list of failpoints (--failpoints).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "common/failpoints.h"
#include "common/subprocess.h"
#include "faultinject/chaos_harness.h"
#include "faultinject/chaos_plan.h"
#include "obs/progress_line.h"
#include "tools/command_flags.h"
#include "tools/commands.h"

GRANARY_COMMAND_BORROWS_FLAG(uint64_t, seed);
GRANARY_COMMAND_BORROWS_FLAG(int, workers);
GRANARY_COMMAND_BORROWS_FLAG(int64_t, epochs);
GRANARY_COMMAND_BORROWS_FLAG(std::string, dir);
GRANARY_COMMAND_BORROWS_FLAG(int64_t, images);
GRANARY_COMMAND_BORROWS_FLAG(int32_t, step_ms);
// granary run's: passed on to the consumers' `granary run` (more than one consumer).
GRANARY_COMMAND_BORROWS_FLAG(std::string, remainder);

ABSL_FLAG(std::string, scenario, "nofail",
          "nofail, recover, failover, killall, dispatcher, putfail, getfail, scale, random, "
          "hostile, equal_shares (2-3 consumers with equal shares under random faults), or "
          "(the replicated dispatcher over a local etcd; needs Debian's etcd binary) "
          "leader_failover or leader_partition, or (as root: every process in a network "
          "namespace of its own) partition_worker, partition_client, partition_oneway, "
          "partition_dispatcher or bandwidth, or (a fault-injecting TCP proxy on every link; no "
          "root needed) proxy_latency, proxy_reset, proxy_halfopen, proxy_truncate or "
          "proxy_bandwidth, or (failing, full and slow disks; disk_full needs root) disk_full, "
          "disk_eio or disk_stall, or (power loss: unsynced writes dropped) powerloss or "
          "powerloss_all, or (clocks: wall-clock steps through Debian's libfaketime, a skewed "
          "Env clock) clock_step, leader_clock_step (replicated) or clock_skew.");
ABSL_FLAG(bool, failpoints, false, "List the failpoints and exit.");
ABSL_FLAG(std::string, inject, "",
          "PROCESS:SPEC — arm GRANARY_FAILPOINTS=SPEC in one process's first start (dispatcher, "
          "worker-N, workers or client), e.g. 'workers:put.mid_chunk_write=after(20):crash'.");
ABSL_FLAG(std::string, cache, "",
          "Override the scenario's cache policy: compute, full, at_mark or auto.");
ABSL_FLAG(std::string, transport, "tcp",
          "How the client reads the workers' elements: tcp, or shm (shared memory; every element "
          "by segment). A soak draws it for each run.");
ABSL_FLAG(bool, hostile, false,
          "Hostile and misbehaving clients alongside the scenario: requests the servers must "
          "refuse, jobs opened and abandoned (not with the replicated scenarios). A soak draws it "
          "for a quarter of its runs.");
ABSL_FLAG(std::string, cache_tier, "files",
          "The cache tier of the Put/Get policies: files, or redis (a redis-server on loopback the "
          "run starts). A soak draws redis for a quarter of its runs.");
ABSL_FLAG(int32_t, consumers, 1,
          "Consumers of the job, each a client process; their union must be exactly once. A soak "
          "runs a quarter of its runs with 4 workers and 2 consumers.");
ABSL_FLAG(bool, soak, false, "Loop random scenarios and seeds until --minutes pass or one fails.");
ABSL_FLAG(double, minutes, 10, "How long --soak runs.");
ABSL_FLAG(std::vector<std::string>, scenarios, {},
          "With --soak: the scenarios it draws from, comma-separated (default: every one).");
ABSL_FLAG(bool, testonly_break_workers, false,
          "TEST ONLY: arm worker.after_resume_before_serve=error in every worker, which then drops "
          "an element (the harness must then report FAIL).");

namespace granary {
namespace {

int ListFailpoints() {
  for (const Failpoint* point : kAllFailpoints) {
    std::printf("%-38s %s\n", point->name, point->where);
  }
  std::printf(
      "\narm with GRANARY_FAILPOINTS=name=[after(N):]crash|error|delay(MS)[,…] or "
      "granary chaos --inject PROCESS:SPEC\n");
  return 0;
}

// A fresh directory under $TMPDIR (or /tmp).
std::string MakeTempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/granary-chaos-XXXXXX");
  return ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
}

// Half of the soak's runs also arm one failpoint, crashing at a random hit in the process that
// passes it (cache failpoints with a cache policy that reaches them; the dispatcher's in the
// first replica, the first leader, of a replicated scenario).
void MaybeArmRandomFailpoint(std::mt19937_64& draws, ChaosOptions& options) {
  if (draws() % 2 == 0) return;
  struct Choice {
    const Failpoint* point;
    const char* process;
    int max_hit;
  };
  static const Choice kChoices[] = {
      {&kJournalAfterWriteBeforeApply, "dispatcher", 14},
      {&kJournalMidGroupCommit, "dispatcher", 12},
      {&kDispatcherAfterLeaseBeforeReply, "dispatcher", 4},
      {&kWorkerAfterProduceBeforeSend, "workers", 60},
      {&kCheckpointAfterWriteBeforeRename, "workers", 6},
      {&kPutAfterCheckpointBeforeCommit, "workers", 3},
      {&kPutMidChunkWrite, "workers", 60},
      {&kGetMidChunk, "workers", 60},
  };
  const Choice& c = kChoices[draws() % std::size(kChoices)];
  options.failpoint_process =
      IsReplicatedScenario(options.scenario) && std::string(c.process) == "dispatcher" ? "replica-0"
                                                                                       : c.process;
  options.failpoints = absl::StrCat(c.point->name, "=after(", 1 + draws() % c.max_hit, "):crash");
  const std::string name = c.point->name;
  if (name.rfind("put.", 0) == 0 || name.rfind("get.", 0) == 0) {
    options.cache_policy = draws() % 2 == 0 ? "full" : "at_mark";
  }
}

// Runs random scenarios of `scenarios` (with random seeds, transports and failpoints) in `dir`
// until --minutes pass or one fails.
int Soak(ChaosOptions base, const std::vector<std::string>& scenarios, const std::string& dir) {
  const absl::Time end = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_minutes) * 60);
  std::mt19937_64 draws(base.seed);
  base.data_dir = dir + "/data";
  if (const absl::Status made = Env::Default()->CreateDirs(dir); !made.ok()) {
    std::fprintf(stderr, "granary chaos: %s\n", std::string(made.message()).c_str());
    return 1;
  }
  int64_t runs = 0, faults = 0, firings = 0, rows = 0, hostile_runs = 0, hostile_requests = 0;
  std::map<std::string, int64_t> per_scenario;
  // Of the runs whose leader was struck (the replicated scenarios): how many, the longest time
  // until another replica led, and the trainer's longest stall.
  int64_t leader_faults = 0;
  double slowest_new_leader = 0, longest_stall = 0;
  const absl::Time start = absl::Now();
  ProgressLine progress;
  while (absl::Now() < end) {
    ChaosOptions options = base;
    options.scenario = scenarios[draws() % scenarios.size()];
    options.seed = draws() % 1000000;
    options.transport = draws() % 2 == 0 ? "tcp" : "shm";
    MaybeArmRandomFailpoint(draws, options);
    options.hostile = !IsReplicatedScenario(options.scenario) && draws() % 4 == 0;
    if (draws() % 4 == 0 && !IsNetworkScenario(options.scenario)) options.cache_tier = "redis";
    if (draws() % 4 == 0) {  // A bigger shape.
      options.workers = 4;
      // equal_shares draws its consumers.
      if (options.scenario != "equal_shares") options.consumers = 2;
    }
    options.dir = absl::StrCat(dir, "/run-", runs);
    const std::string output = options.dir + ".out";
    std::FILE* out = std::fopen(output.c_str(), "w");
    if (out == nullptr) {
      std::fprintf(stderr, "granary chaos: cannot write %s\n", output.c_str());
      return 1;
    }
    progress.Update(absl::StrFormat("soak: run %d (%s), %.1f min left", runs + 1, options.scenario,
                                    absl::ToDoubleMinutes(end - absl::Now())));
    const ChaosReport report = RunChaos(options, out);
    progress.Clear();
    std::fclose(out);
    ++runs;
    if (!report.passed) {
      std::printf("run %lld FAILED; its output (%s):\n", static_cast<long long>(runs),
                  output.c_str());
      std::fflush(stdout);
      std::system(absl::StrCat("cat '", output, "'").c_str());
      std::printf("reproduce: %s\n", ChaosCommandLine(options).c_str());
      return 1;
    }
    faults += report.faults_injected;
    firings += report.failpoint_firings;
    rows += report.rows_verified;
    ++per_scenario[options.scenario];
    if (options.hostile) {
      ++hostile_runs;
      hostile_requests += report.hostile_requests;
    }
    std::string leader;
    if (report.new_leader_seconds >= 0) {
      ++leader_faults;
      slowest_new_leader = std::max(slowest_new_leader, report.new_leader_seconds);
      longest_stall = std::max(longest_stall, report.longest_stall_after_faults_seconds);
      leader =
          absl::StrFormat(", a new leader after %.2f s, the trainer stalled at most %.2f s",
                          report.new_leader_seconds, report.longest_stall_after_faults_seconds);
    }
    std::printf("run %lld: %s: PASS, %lld faults, %lld rows, %.1f s%s\n",
                static_cast<long long>(runs), ChaosCommandLine(options).c_str(),
                static_cast<long long>(report.faults_injected),
                static_cast<long long>(report.rows_verified), report.seconds, leader.c_str());
    std::fflush(stdout);
    std::error_code ignored;
    std::filesystem::remove_all(options.dir, ignored);
    std::filesystem::remove(output, ignored);
  }
  std::string mix;
  for (const auto& [name, n] : per_scenario) absl::StrAppend(&mix, " ", name, "=", n);
  std::printf(
      "soak: %lld runs in %.1f min, %lld faults injected (SIGKILLs, cuts and scaling steps "
      "planned by the scenarios), %lld failpoint firings, %lld rows verified exactly once, 0 "
      "failures; runs per scenario:%s\n",
      static_cast<long long>(runs), absl::ToDoubleMinutes(absl::Now() - start),
      static_cast<long long>(faults), static_cast<long long>(firings), static_cast<long long>(rows),
      mix.c_str());
  if (hostile_runs > 0) {
    std::printf(
        "soak: %lld runs with hostile clients alongside: %lld hostile requests, each "
        "answered as it deserved\n",
        static_cast<long long>(hostile_runs), static_cast<long long>(hostile_requests));
  }
  if (leader_faults > 0) {
    std::printf(
        "soak: %lld runs struck the leader: another replica led after at most %.2f s, the "
        "trainer stalled at most %.2f s\n",
        static_cast<long long>(leader_faults), slowest_new_leader, longest_stall);
  }
  return 0;
}

}  // namespace

int ChaosCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "granary chaos --scenario S --seed N [--workers W] [--epochs E] [--dir D] [--cache C] "
      "[--inject PROCESS:SPEC] [--images N] [--step_ms T] [--transport tcp|shm] [--hostile] "
      "[--consumers K] [--remainder pad|drop|uneven] [--cache_tier files|redis] | "
      "granary chaos --soak --minutes M "
      "[--seed N] [--scenarios S,S...] | granary chaos --failpoints");
  // This command's defaults for flags it shares with other commands.
  absl::SetFlag(&FLAGS_epochs, 3);
  absl::SetFlag(&FLAGS_images, 512);
  absl::SetFlag(&FLAGS_step_ms, 10);
  absl::SetFlag(&FLAGS_remainder, "");  // The scenario's (equal_shares draws it from the seed).
  ParseCommandFlags(argc, argv);
  if (absl::GetFlag(FLAGS_failpoints)) return ListFailpoints();

  ChaosOptions options;
  options.binary = SelfExecutablePath();
  options.scenario = absl::GetFlag(FLAGS_scenario);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.workers = absl::GetFlag(FLAGS_workers);
  options.epochs = absl::GetFlag(FLAGS_epochs);
  options.images = absl::GetFlag(FLAGS_images);
  options.step_ms = absl::GetFlag(FLAGS_step_ms);
  options.cache_policy = absl::GetFlag(FLAGS_cache);
  options.testonly_break_workers = absl::GetFlag(FLAGS_testonly_break_workers);
  options.transport = absl::GetFlag(FLAGS_transport);
  options.hostile = absl::GetFlag(FLAGS_hostile);
  options.consumers = absl::GetFlag(FLAGS_consumers);
  options.remainder = absl::GetFlag(FLAGS_remainder);
  options.cache_tier = absl::GetFlag(FLAGS_cache_tier);
  if (options.transport != "tcp" && options.transport != "shm") {
    std::fprintf(stderr, "granary chaos: --transport '%s': expected tcp or shm\n",
                 options.transport.c_str());
    return 2;
  }
  const std::string inject = absl::GetFlag(FLAGS_inject);
  if (!inject.empty()) {
    const size_t colon = inject.find(':');
    if (colon == std::string::npos) {
      std::fprintf(stderr, "granary chaos: --inject '%s': expected PROCESS:SPEC\n", inject.c_str());
      return 2;
    }
    options.failpoint_process = inject.substr(0, colon);
    options.failpoints = inject.substr(colon + 1);
  }
  std::vector<std::string> soak_scenarios = absl::GetFlag(FLAGS_scenarios);
  if (!soak_scenarios.empty() && !absl::GetFlag(FLAGS_soak)) {
    std::fprintf(stderr, "granary chaos: --scenarios is for --soak (one run takes --scenario)\n");
    return 2;
  }
  for (const std::string& scenario : soak_scenarios) {
    if (const absl::Status known = CheckChaosScenario(scenario); !known.ok()) {
      std::fprintf(stderr, "granary chaos: --scenarios: %s\n",
                   std::string(known.message()).c_str());
      return 2;
    }
  }
  if (soak_scenarios.empty()) soak_scenarios = ChaosScenarios();
  if (absl::GetFlag(FLAGS_soak) && ::geteuid() != 0) {
    const auto needs_root =
        std::remove_if(soak_scenarios.begin(), soak_scenarios.end(),
                       [](const std::string& s) { return IsNetworkScenario(s); });
    if (needs_root != soak_scenarios.end()) {
      std::fprintf(stderr,
                   "granary chaos: not root: the soak skips the network scenarios (they run "
                   "every process in a network namespace of its own)\n");
      soak_scenarios.erase(needs_root, soak_scenarios.end());
    }
    if (soak_scenarios.empty()) {
      std::fprintf(stderr, "granary chaos: --scenarios: every one needs root\n");
      return 2;
    }
  }
  const bool temporary = absl::GetFlag(FLAGS_dir).empty();
  const std::string dir = temporary ? MakeTempDir() : absl::GetFlag(FLAGS_dir);
  if (dir.empty()) {
    std::fprintf(stderr, "granary chaos: cannot create a directory under $TMPDIR\n");
    return 1;
  }
  if (absl::GetFlag(FLAGS_soak)) return Soak(options, soak_scenarios, dir);

  options.dir = dir;
  options.data_dir = dir + "/data";
  const ChaosReport report = RunChaos(options, stdout);
  std::error_code ignored;
  // A failed run's files stay for its post-mortem (the verdict names the directory).
  if (temporary && (report.passed || std::filesystem::is_empty(dir, ignored))) {
    std::filesystem::remove_all(dir, ignored);
  }
  return report.passed ? 0 : 1;
}

}  // namespace granary
