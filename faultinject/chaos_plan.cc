#include "faultinject/chaos_plan.h"

#include <algorithm>
#include <random>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace granary {
namespace {

// Seeded draws. std::mt19937_64's output is fixed by the standard (unlike the standard
// distributions'), so plans are the same with every compiler.
class Draws {
 public:
  explicit Draws(uint64_t seed) : engine_(seed) {}
  // Uniform in [lo, hi].
  int64_t Between(int64_t lo, int64_t hi) {
    return hi <= lo ? lo
                    : lo + static_cast<int64_t>(engine_() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool Chance(int percent) { return Between(0, 99) < percent; }

 private:
  std::mt19937_64 engine_;
};

std::string WorkerName(int64_t i) { return absl::StrCat("worker-", i); }
std::string ConsumerName(int64_t i) { return absl::StrCat("client-", i); }

std::vector<std::string> AllWorkers(int workers) {
  std::vector<std::string> names;
  for (int i = 0; i < workers; ++i) names.push_back(WorkerName(i));
  return names;
}

// A row well inside the epoch: late enough that the epoch is under way, early enough that the
// fault lands before it ends.
int64_t MidEpochRow(Draws& draws, int64_t rows_per_epoch) {
  return draws.Between(rows_per_epoch * 15 / 100, rows_per_epoch * 65 / 100);
}

CachePolicy SomeCachePolicy(Draws& draws, bool compute_too) {
  const int64_t pick = draws.Between(compute_too ? 0 : 1, 2);
  return pick == 0 ? CACHE_COMPUTE : pick == 1 ? CACHE_FULL : CACHE_AT_MARK;
}

// random's faults (chaos_plan.h), and `extra` faults timed by epoch and row, all in the order
// they strike. With several consumers of its own (plan.consumers), a fault may strike one alone.
void AddRandomFaults(Draws& draws, int64_t rows_per_epoch, ChaosPlan& plan,
                     std::vector<ChaosFault> extra = {}) {
  std::vector<std::string> members = {"dispatcher", "client"};
  for (const std::string& w : AllWorkers(plan.workers + plan.standby)) members.push_back(w);
  for (int i = 0; i < plan.consumers; ++i) members.push_back(ConsumerName(i));
  const int64_t n = draws.Between(1, 4);
  std::vector<ChaosFault> primary = std::move(extra);
  for (int64_t i = 0; i < n; ++i) {
    ChaosFault f;
    f.epoch = draws.Between(0, plan.epochs - 1);
    f.rows = MidEpochRow(draws, rows_per_epoch);
    if (draws.Chance(25)) {
      f.scale_to = static_cast<int32_t>(draws.Between(1, plan.workers + plan.standby));
      primary.push_back(std::move(f));
      continue;
    }
    for (const std::string& m : members) {
      if (draws.Chance(35)) f.victims.push_back(m);
    }
    if (f.victims.empty()) f.victims.push_back(members[draws.Between(0, members.size() - 1)]);
    primary.push_back(std::move(f));
  }
  std::sort(primary.begin(), primary.end(), [](const ChaosFault& a, const ChaosFault& b) {
    return std::tie(a.epoch, a.rows) < std::tie(b.epoch, b.rows);
  });
  for (ChaosFault& f : primary) {
    const std::vector<std::string> restarted = f.victims;
    const bool scaled = f.scale_to > 0;
    plan.faults.push_back(std::move(f));
    if (scaled) {
      if (draws.Chance(30)) {  // The dispatcher dies right after the step.
        ChaosFault again;
        again.during_recovery = true;
        again.victims = {"dispatcher"};
        plan.faults.push_back(std::move(again));
      }
      continue;
    }
    if (draws.Chance(30)) {  // Strike again while they recover.
      ChaosFault again;
      again.during_recovery = true;
      for (const std::string& m : restarted) {
        if (draws.Chance(60)) again.victims.push_back(m);
      }
      if (again.victims.empty()) again.victims.push_back(restarted.front());
      plan.faults.push_back(std::move(again));
    }
  }
}

// equal_shares (chaos_plan.h): 2-3 consumers, a remainder rule, random's faults and one consumer
// SIGKILLed late in an epoch, when the others may have finished their own share: it pads or
// drops then.
void AddEqualShares(Draws& draws, int64_t rows_per_epoch, ChaosPlan& plan) {
  static const char* const kRemainders[] = {"pad", "drop", "uneven"};
  plan.consumers = static_cast<int>(draws.Between(2, 3));
  plan.sharding = "equal";
  plan.remainder = kRemainders[draws.Between(0, std::size(kRemainders) - 1)];
  plan.cache_policy = SomeCachePolicy(draws, /*compute_too=*/true);
  plan.standby = 1;
  ChaosFault late;
  late.epoch = draws.Between(0, plan.epochs - 1);
  late.rows = draws.Between(rows_per_epoch * 85 / 100, rows_per_epoch * 98 / 100);
  late.victims = {ConsumerName(draws.Between(0, plan.consumers - 1))};
  AddRandomFaults(draws, rows_per_epoch, plan, {std::move(late)});
}

// The network scenarios' disruption (chaos_plan.h), struck by `disruption` (timed mid-epoch),
// and the heal after it.
void AddNetworkFaults(Draws& draws, const std::string& scenario, const std::string& worker,
                      ChaosFault disruption, ChaosPlan& plan) {
  // Not in the last epoch (when there are 2): the disruption and its heal then land while the
  // client still reads.
  disruption.epoch = draws.Between(0, std::max<int64_t>(0, plan.epochs - 2));
  NetworkFault net;
  ChaosFault heal;
  heal.after_previous = true;
  heal.after_ms = draws.Between(500, 4000);
  heal.network.emplace().kind = NetworkFault::Kind::kHeal;
  if (scenario == "partition_worker") {
    net.from = worker;
    net.to = {"dispatcher"};
    // Longer than the dispatcher's --worker_timeout_ms=1000 (chaos_processes.cc).
    heal.after_ms = draws.Between(1500, 5000);
  } else if (scenario == "partition_client") {
    net.from = "client";
    net.to = {worker};
    net.silent = draws.Chance(70);
  } else if (scenario == "partition_oneway") {
    const std::vector<std::pair<std::string, std::string>> pairs = {
        {worker, "dispatcher"}, {"client", worker}, {"client", "dispatcher"}};
    const auto& [a, b] = pairs[draws.Between(0, pairs.size() - 1)];
    const bool reversed = draws.Chance(50);
    net.from = reversed ? b : a;
    net.to = {reversed ? a : b};
    net.one_way = true;
  } else if (scenario == "partition_dispatcher") {
    net.from = "dispatcher";
    net.to = AllWorkers(plan.workers);
    net.to.push_back("client");
    net.silent = draws.Chance(50);
    heal.after_ms = draws.Between(1000, 4000);
  } else {  // bandwidth
    std::vector<std::string> members = AllWorkers(plan.workers);
    members.insert(members.end(), {"dispatcher", "client"});
    net.kind = NetworkFault::Kind::kLimit;
    net.from = members[draws.Between(0, members.size() - 1)];
    net.kbit_per_second = draws.Between(2, 20) * 1000;
    heal.after_ms = draws.Between(1000, 5000);
  }
  disruption.network = std::move(net);
  plan.faults.push_back(std::move(disruption));
  plan.faults.push_back(std::move(heal));
}

std::string DescribeNetworkFault(const NetworkFault& net) {
  switch (net.kind) {
    case NetworkFault::Kind::kHeal:
      return "heal the network (undo every cut and limit)";
    case NetworkFault::Kind::kLimit:
      return absl::StrCat("limit ", net.from, "'s link to ", net.kbit_per_second,
                          " kbit/s each way");
    case NetworkFault::Kind::kCut:
      break;
  }
  return absl::StrCat(net.one_way ? "drop the packets from " : "cut ", net.from,
                      net.one_way ? " to " : " from ", absl::StrJoin(net.to, " "),
                      net.one_way ? " (one way)" : " both ways",
                      net.silent ? ", silently (dropped: connections time out)"
                                 : ", refused at once (an unreachable route)");
}

// What a disk scenario's fault does (ChaosFault::Describe).
std::string DescribeDisk(const ChaosDiskFault& disk) {
  const std::string op(DiskOpName(disk.op));
  switch (disk.kind) {
    case ChaosDiskFault::Kind::kFull:
      return absl::StrCat("fill the tmpfs of the ", disk.target, " up (ENOSPC)");
    case ChaosDiskFault::Kind::kEio:
      return absl::StrCat("EIO on every ", op, " of ", disk.process, " in the ", disk.target);
    case ChaosDiskFault::Kind::kStall:
      return absl::StrCat("every ", op, " of ", disk.process, " in the ", disk.target, " stalls ",
                          disk.stall_ms, " ms");
    case ChaosDiskFault::Kind::kHeal:
      return absl::StrCat("heal the disk of the ", disk.target);
  }
  return "";
}

// The disk scenarios (chaos_plan.h): a fault mid-epoch on a seeded target, healed after a seeded
// delay.
void AddDiskFaults(Draws& draws, const std::string& scenario, int64_t rows_per_epoch,
                   ChaosPlan& plan) {
  static const char* const kTargets[] = {"journal", "checkpoints", "cache"};
  ChaosDiskFault disk;
  disk.target = kTargets[draws.Between(0, 2)];
  disk.process =
      disk.target == "journal" ? "dispatcher" : WorkerName(draws.Between(0, plan.workers - 1));
  ChaosFault fault;
  fault.epoch = draws.Between(0, plan.epochs - 1);
  fault.rows = MidEpochRow(draws, rows_per_epoch);
  ChaosFault heal;
  heal.after_previous = true;
  heal.after_ms = draws.Between(500, 3000);
  if (scenario == "disk_full") {
    disk.kind = ChaosDiskFault::Kind::kFull;  // Of every process using the target.
    disk.process.clear();
  } else if (scenario == "disk_eio") {
    disk.kind = ChaosDiskFault::Kind::kEio;
    if (disk.target == "journal") {
      disk.op = draws.Chance(50) ? DiskOp::kWrite : DiskOp::kSync;
      heal.victims = {"dispatcher"};
    } else {
      disk.op = draws.Chance(50) ? DiskOp::kWrite : DiskOp::kRead;
      if (disk.target == "checkpoints" && disk.op == DiskOp::kRead) {
        fault.victims = {disk.process};
      }
    }
  } else {  // disk_stall
    disk.kind = ChaosDiskFault::Kind::kStall;
    disk.op = DiskOp::kSync;
    disk.stall_ms = draws.Between(1000, 5000);
    heal.after_ms = draws.Between(1000, 4000);
  }
  if (disk.target == "cache") {
    // Epoch 0 writes the cache, the later ones read it.
    plan.cache_policy = SomeCachePolicy(draws, /*compute_too=*/false);
    fault.epoch = disk.op == DiskOp::kRead ? draws.Between(1, plan.epochs - 1) : 0;
  }
  heal.disk = ChaosDiskFault{ChaosDiskFault::Kind::kHeal, disk.target, disk.process};
  fault.disk = std::move(disk);
  plan.faults.push_back(std::move(fault));
  plan.faults.push_back(std::move(heal));
}

// Power loss of one server (the dispatcher or `worker`) or, in powerloss_all, of every one,
// after `worker`'s k-th checkpoint, torn in half the seeds; `fault` holds the draws of the
// epoch and row. In 30% of the seeds the same servers lose power again while they recover
// (their ledgers since the first power loss), torn or not.
void AddPowerLosses(Draws& draws, const std::string& worker, ChaosFault fault, ChaosPlan& plan) {
  plan.cache_policy = SomeCachePolicy(draws, /*compute_too=*/true);
  fault.checkpointer = worker;
  fault.checkpoints = draws.Between(1, 3);
  if (plan.scenario == "powerloss_all") {
    fault.victims = AllWorkers(plan.workers);
    fault.victims.insert(fault.victims.begin(), "dispatcher");
  } else {
    fault.victims = {draws.Chance(50) ? "dispatcher" : worker};
  }
  const auto power_loss = [&draws] {
    PowerLossFault power;
    power.torn = draws.Chance(50);
    if (power.torn) power.torn_seed = static_cast<uint64_t>(draws.Between(1, 1 << 30));
    return power;
  };
  fault.power_loss = power_loss();
  plan.faults.push_back(fault);
  if (draws.Chance(30)) {
    ChaosFault again;
    again.during_recovery = true;
    again.victims = fault.victims;
    again.power_loss = power_loss();
    plan.faults.push_back(std::move(again));
  }
}

// Every link of a run with proxies (chaos_plan.h), in a fixed order.
std::vector<std::string> ProxyLinks(int workers) {
  std::vector<std::string> links = {"client>dispatcher"};
  for (const std::string& w : AllWorkers(workers)) links.push_back(w + ">dispatcher");
  for (const std::string& w : AllWorkers(workers)) links.push_back("client>" + w);
  return links;
}

absl::Duration SomeMillis(Draws& draws, int64_t lo, int64_t hi) {
  return absl::Milliseconds(draws.Between(lo, hi));
}

// The proxy scenarios' faults: `poison` (timed like the other scenarios' first fault) with its
// toxics drawn, then its heal (or the further resets).
void AddProxyFaults(Draws& draws, const std::string& scenario, ChaosFault poison, ChaosPlan& plan) {
  plan.proxies = true;
  if (scenario == "proxy_halfopen") plan.standby = 1;
  const std::vector<std::string> links = ProxyLinks(plan.workers + plan.standby);
  ProxyFault fault;
  fault.links = {links[draws.Between(0, links.size() - 1)]};
  ChaosFault heal;
  heal.after_previous = true;
  if (scenario == "proxy_latency") {
    fault.links.clear();
    for (const std::string& link : links) {
      if (draws.Chance(40)) fault.links.push_back(link);
    }
    if (fault.links.empty()) fault.links.push_back(links[draws.Between(0, links.size() - 1)]);
    for (ProxyToxics* toxics : {&fault.to_server, &fault.to_client}) {
      if (toxics == &fault.to_client && draws.Chance(30)) continue;
      toxics->latency = SomeMillis(draws, 20, 150);
      toxics->jitter = SomeMillis(draws, 0, 100);
      if (draws.Chance(30)) toxics->slow_close = SomeMillis(draws, 100, 1000);
    }
    heal.after_ms = draws.Between(1000, 4000);
  } else if (scenario == "proxy_reset") {
    fault.reset = true;
    poison.proxy = fault;
    plan.faults.push_back(std::move(poison));
    for (int64_t again = draws.Between(0, 2); again > 0; --again) {
      ChaosFault reset;
      reset.after_previous = true;
      reset.after_ms = draws.Between(200, 1500);
      reset.proxy = fault;
      plan.faults.push_back(std::move(reset));
    }
    return;
  } else if (scenario == "proxy_halfopen") {
    const int64_t mode = draws.Between(0, 3);
    fault.to_server.half_open = mode == 0 || mode == 2;
    fault.to_client.half_open = mode == 1 || mode == 2;
    fault.timeout = mode == 3;
    heal.after_ms = draws.Between(1500, 3500);
  } else if (scenario == "proxy_truncate") {
    (draws.Chance(50) ? fault.to_server : fault.to_client).limit_bytes = draws.Between(50, 3000);
    heal.after_ms = draws.Between(500, 3000);
  } else {  // proxy_bandwidth
    const int64_t directions = draws.Between(0, 2);
    const int64_t rate = draws.Between(50000, 500000);
    if (directions != 1) fault.to_server.bytes_per_second = rate;
    if (directions != 0) fault.to_client.bytes_per_second = rate;
    heal.after_ms = draws.Between(1000, 4000);
  }
  poison.proxy = fault;
  heal.proxy = ProxyFault{.links = fault.links};
  plan.faults.push_back(std::move(poison));
  plan.faults.push_back(std::move(heal));
}

// The clock scenarios' steps (chaos_plan.h): back 1-10 minutes.
int64_t BackwardStepSeconds(Draws& draws) { return -draws.Between(60, 600); }

ClockFault StepOf(const std::string& process, int64_t offset_seconds) {
  ClockFault step;
  step.process = process;
  step.wall_offset_seconds = offset_seconds;
  return step;
}

ClockFault SkewOf(const std::string& process, double rate, double jump_seconds) {
  ClockFault skew;
  skew.process = process;
  skew.skew = ClockSkew{.rate = rate, .jump_seconds = jump_seconds};
  return skew;
}

// The dispatcher, a worker or (with `client`) the client, as the seed picks.
std::string SomeProcess(Draws& draws, const ChaosPlan& plan, bool client) {
  std::vector<std::string> members = {"dispatcher"};
  if (client) members.push_back("client");
  for (const std::string& w : AllWorkers(plan.workers)) members.push_back(w);
  return members[draws.Between(0, members.size() - 1)];
}

// A fault `after_ms` after the previous one that changes a clock.
ChaosFault ClockFaultAfterPrevious(int64_t after_ms, ClockFault clock) {
  ChaosFault f;
  f.after_previous = true;
  f.after_ms = after_ms;
  f.clock = std::move(clock);
  return f;
}

// clock_skew: `f` (timed mid-epoch) skews the dispatcher's or a worker's Env clock; a second
// fault sets its rate back to 1.
void AddClockSkew(Draws& draws, ChaosFault f, ChaosPlan& plan) {
  const std::string process = SomeProcess(draws, plan, /*client=*/false);
  static constexpr double kRates[] = {0.5, 0.75, 1.5, 2};
  const double rate = kRates[draws.Between(0, std::size(kRates) - 1)];
  const double jump = draws.Chance(50) ? static_cast<double>(draws.Between(60, 600)) : 0;
  f.clock = SkewOf(process, rate, jump);
  plan.faults.push_back(std::move(f));
  plan.faults.push_back(
      ClockFaultAfterPrevious(draws.Between(2000, 5000), SkewOf(process, 1, jump)));
}

// clock_step: `f` (timed mid-epoch) steps one process's wall clock back; a second fault heals it.
void AddClockStep(Draws& draws, ChaosFault f, ChaosPlan& plan) {
  const std::string process = SomeProcess(draws, plan, /*client=*/true);
  f.clock = StepOf(process, BackwardStepSeconds(draws));
  plan.faults.push_back(std::move(f));
  plan.faults.push_back(ClockFaultAfterPrevious(draws.Between(1000, 4000), StepOf(process, 0)));
}

// leader_clock_step: `cut` (timed mid-epoch) cuts the leader from etcd, its wall clock steps back
// right after; once another replica leads the cut heals, then the clock.
void AddLeaderClockStep(Draws& draws, ChaosFault cut, ChaosPlan& plan) {
  cut.cut_leader = true;
  plan.faults.push_back(std::move(cut));
  const int64_t step_after_ms = draws.Between(0, 300);  // drawn in this order: plans are fixed
  plan.faults.push_back(
      ClockFaultAfterPrevious(step_after_ms, StepOf(kLeader, BackwardStepSeconds(draws))));
  ChaosFault heal_cut;
  heal_cut.after_new_leader = true;
  heal_cut.after_ms = draws.Between(1000, 3000);
  heal_cut.heal_cut = true;
  plan.faults.push_back(std::move(heal_cut));
  plan.faults.push_back(ClockFaultAfterPrevious(draws.Between(0, 2000), StepOf(kLeader, 0)));
}

}  // namespace

std::string ProxyFault::Describe() const {
  const std::string named = absl::StrJoin(links, " ");
  if (reset) return absl::StrCat("reset every connection of ", named);
  const std::string none = ProxyToxics().Describe();
  if (!timeout && to_server.Describe() == none && to_client.Describe() == none) {
    return absl::StrCat("heal ", named, " (no toxics)");
  }
  return absl::StrCat(named, ": toward the server ", to_server.Describe(), "; back ",
                      to_client.Describe(),
                      timeout ? "; timeout: nothing forwarded, new connections held" : "");
}

std::string ChaosFault::Describe() const {
  std::string when;
  if (during_recovery) {
    when = "during recovery";
  } else if (after_new_leader) {
    when = absl::StrCat("once another replica leads, ", after_ms, " ms after the previous fault");
  } else if (after_previous) {
    when = absl::StrCat(after_ms, " ms after the previous fault");
  } else {
    when = absl::StrCat("epoch ", epoch, " row ", rows);
    if (!checkpointer.empty()) {
      absl::StrAppend(&when, ", once ", checkpointer, " wrote ", checkpoints, " checkpoint",
                      checkpoints == 1 ? "" : "s");
    }
  }
  if (disk.has_value()) {
    std::string what = absl::StrCat(when, ": ", DescribeDisk(*disk));
    if (!victims.empty()) {
      absl::StrAppend(&what, ", then SIGKILL ", absl::StrJoin(victims, " "), ", restart");
    }
    return what;
  }
  if (scale_to > 0) {
    return absl::StrCat(when, ": scale the job to ", scale_to, " task", scale_to == 1 ? "" : "s",
                        " per consumer");
  }
  if (network.has_value()) return absl::StrCat(when, ": ", DescribeNetworkFault(*network));
  if (proxy.has_value()) return absl::StrCat(when, ": proxy: ", proxy->Describe());
  if (cut_leader) return absl::StrCat(when, ": cut the leader from every etcd member");
  if (heal_cut) {
    return absl::StrCat(when, ": heal the cut; the old leader must rejoin as a follower");
  }
  if (power_loss.has_value()) {
    absl::StrAppend(
        &when, ": power loss of ", absl::StrJoin(victims, " "),
        " (SIGKILL, drop every write since its last fsync",
        power_loss->torn ? absl::StrCat(", torn with seed ", power_loss->torn_seed) : "",
        "), restart");
    return when;
  }
  const auto named = [](std::string* out, const std::string& name) {
    out->append(name == kLeader ? "the leader" : name);
  };
  if (clock.has_value()) {
    std::string whose;
    named(&whose, clock->process);
    if (clock->skew.has_value()) {
      return absl::StrCat(when, ": run ", whose, "'s Env (steady) clock at ", clock->skew->rate,
                          "x, jumped ", clock->skew->jump_seconds, " s forward in all",
                          clock->skew->rate == 1 ? " (the skew healed)" : "");
    }
    if (clock->wall_offset_seconds == 0) {
      return absl::StrCat(when, ": heal ", whose, "'s wall clock (back to the true time)");
    }
    return absl::StrCat(when, ": step ", whose, "'s wall clock to ", clock->wall_offset_seconds,
                        " s off the true time (its steady clock keeps running)");
  }
  if (!revive.empty()) {
    return absl::StrCat(when, ": start ", absl::StrJoin(revive, " ", named), " again");
  }
  return absl::StrCat(when, ": SIGKILL ", absl::StrJoin(victims, " ", named),
                      for_good ? " for good" : ", restart");
}

const std::vector<std::string>& ChaosScenarios() {
  static const auto* scenarios = new std::vector<std::string>{"nofail",
                                                              "recover",
                                                              "failover",
                                                              "killall",
                                                              "dispatcher",
                                                              "putfail",
                                                              "getfail",
                                                              "scale",
                                                              "random",
                                                              "hostile",
                                                              "equal_shares",
                                                              "leader_failover",
                                                              "leader_partition",
                                                              "partition_worker",
                                                              "partition_client",
                                                              "partition_oneway",
                                                              "partition_dispatcher",
                                                              "bandwidth",
                                                              "disk_full",
                                                              "disk_eio",
                                                              "disk_stall",
                                                              "powerloss",
                                                              "powerloss_all",
                                                              "proxy_latency",
                                                              "proxy_reset",
                                                              "proxy_halfopen",
                                                              "proxy_truncate",
                                                              "proxy_bandwidth",
                                                              "clock_step",
                                                              "leader_clock_step",
                                                              "clock_skew"};
  return *scenarios;
}

absl::Status CheckChaosScenario(const std::string& scenario) {
  const std::vector<std::string>& known = ChaosScenarios();
  if (std::find(known.begin(), known.end(), scenario) != known.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("unknown chaos scenario '", scenario,
                                                 "' (known: ", absl::StrJoin(known, ", "), ")"));
}

bool IsReplicatedScenario(const std::string& scenario) {
  return scenario == "leader_failover" || scenario == "leader_partition" ||
         scenario == "leader_clock_step";
}

bool IsNetworkScenario(const std::string& scenario) {
  return absl::StartsWith(scenario, "partition_") || scenario == "bandwidth";
}

bool IsDiskScenario(const std::string& scenario) {
  return scenario == "disk_full" || scenario == "disk_eio" || scenario == "disk_stall";
}
bool StepsWallClocks(const std::string& scenario) {
  return scenario == "clock_step" || scenario == "leader_clock_step";
}

bool SkewsEnvClocks(const std::string& scenario) { return scenario == "clock_skew"; }

absl::StatusOr<ChaosPlan> MakeChaosPlan(const std::string& scenario, uint64_t seed, int workers,
                                        int64_t epochs, int64_t rows_per_epoch) {
  RETURN_IF_ERROR(CheckChaosScenario(scenario));
  if (workers < 1 || epochs < 1 || rows_per_epoch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("chaos scenario ", scenario, ": needs at least 1 worker, 1 epoch and 1 row"));
  }
  if ((scenario == "putfail" || scenario == "getfail" || IsDiskScenario(scenario)) && epochs < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chaos scenario ", scenario, ": needs at least 2 epochs (a Put epoch, then Get)"));
  }
  ChaosPlan plan;
  plan.scenario = scenario;
  plan.seed = seed;
  plan.workers = workers;
  plan.epochs = epochs;
  Draws draws(seed);
  ChaosFault f;
  f.epoch = draws.Between(0, epochs - 1);
  f.rows = MidEpochRow(draws, rows_per_epoch);
  const std::string worker = WorkerName(draws.Between(0, workers - 1));
  if (scenario == "nofail") return plan;
  if (scenario == "recover" || scenario == "failover") {
    f.checkpointer = worker;
    f.checkpoints = draws.Between(1, 3);
    f.victims = {worker};
    f.for_good = scenario == "failover";
    plan.standby = scenario == "failover" ? 1 : 0;
  } else if (scenario == "killall") {
    f.victims = AllWorkers(workers);
    f.victims.insert(f.victims.begin(), "dispatcher");
  } else if (scenario == "dispatcher") {
    f.victims = {"dispatcher"};
  } else if (scenario == "putfail" || scenario == "getfail") {
    plan.cache_policy = SomeCachePolicy(draws, /*compute_too=*/false);
    f.epoch = scenario == "putfail" ? 0 : draws.Between(1, epochs - 1);
    if (scenario == "putfail") {
      f.checkpointer = worker;
      f.checkpoints = draws.Between(1, 2);
    }
    f.victims = AllWorkers(workers);
  } else if (scenario == "scale") {
    plan.standby = 1;
    f.epoch = draws.Between(0, epochs - 1);
    const auto at = [&](int64_t lo_percent, int64_t hi_percent) {
      ChaosFault step;
      step.epoch = f.epoch;
      step.rows =
          draws.Between(rows_per_epoch * lo_percent / 100, rows_per_epoch * hi_percent / 100);
      return step;
    };
    ChaosFault shrink = at(10, 25);
    shrink.scale_to = 1;
    ChaosFault grow = at(30, 45);
    grow.scale_to = workers + 1;
    ChaosFault kill = at(50, 60);
    kill.victims = {worker};
    ChaosFault again;  // as soon as the killed worker serves again
    again.during_recovery = true;
    again.scale_to = std::max(1, workers / 2);
    ChaosFault dispatcher;  // right after that step
    dispatcher.during_recovery = true;
    dispatcher.victims = {"dispatcher"};
    plan.faults = {shrink, grow, kill, again, dispatcher};
    return plan;
  } else if (IsReplicatedScenario(scenario)) {
    plan.replicas = 3;
    // Not in the last epoch (when there are 2): a later epoch then starts on the new leader, and
    // the revived or healed replica catches up while the client still reads.
    f.epoch = draws.Between(0, std::max<int64_t>(0, epochs - 2));
    ChaosFault after;  // the kill's restart, or the cut's heal
    after.after_new_leader = true;
    if (scenario == "leader_clock_step") {
      AddLeaderClockStep(draws, std::move(f), plan);
      return plan;
    }
    if (scenario == "leader_failover") {
      f.victims = {kLeader};
      f.for_good = true;
      plan.faults.push_back(std::move(f));
      if (draws.Chance(30)) return plan;  // It stays dead.
      after.after_ms = draws.Between(0, 3000);
      after.revive = {kLeader};
    } else {
      f.cut_leader = true;
      plan.faults.push_back(std::move(f));
      after.after_ms = draws.Between(1000, 4000);
      after.heal_cut = true;
    }
    plan.faults.push_back(std::move(after));
    return plan;
  } else if (IsNetworkScenario(scenario)) {
    AddNetworkFaults(draws, scenario, worker, std::move(f), plan);
    return plan;
  } else if (IsDiskScenario(scenario)) {
    AddDiskFaults(draws, scenario, rows_per_epoch, plan);
    return plan;
  } else if (scenario == "powerloss" || scenario == "powerloss_all") {
    AddPowerLosses(draws, worker, std::move(f), plan);
    return plan;
  } else if (absl::StartsWith(scenario, "proxy_")) {
    AddProxyFaults(draws, scenario, std::move(f), plan);
    return plan;
  } else if (scenario == "clock_step") {
    AddClockStep(draws, std::move(f), plan);
    return plan;
  } else if (scenario == "clock_skew") {
    AddClockSkew(draws, std::move(f), plan);
    return plan;
  } else if (scenario == "equal_shares") {
    AddEqualShares(draws, rows_per_epoch, plan);
    return plan;
  } else {  // random, hostile
    plan.hostile_traffic = scenario == "hostile";
    plan.cache_policy = SomeCachePolicy(draws, /*compute_too=*/true);
    plan.standby = 1;
    AddRandomFaults(draws, rows_per_epoch, plan);
    return plan;
  }
  plan.faults.push_back(std::move(f));
  return plan;
}

}  // namespace granary
