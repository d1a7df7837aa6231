#include "faultinject/chaos_harness.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache/cache_policy.h"
#include "client/run_position.h"
#include "common/env.h"
#include "common/failpoint.h"
#include "common/failpoints.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "faultinject/chaos_disks.h"
#include "faultinject/chaos_plan.h"
#include "faultinject/chaos_processes.h"
#include "faultinject/history_checker.h"
#include "faultinject/hostile_traffic.h"
#include "pipeline/digests/digest_file.h"
#include "tools/synthetic_imagenet.h"

namespace granary {
namespace {

// The last lines of a process's log, for a failure's message (a soak deletes its passing runs'
// directories, and CI keeps only the output): "; its log ends: <lines>", or "" if unreadable.
std::string LogTail(const std::string& path) {
  absl::StatusOr<std::string> log = ReadFileToString(Env::Default(), path);
  if (!log.ok() || log->empty()) return "";
  std::vector<absl::string_view> lines = absl::StrSplit(*log, '\n', absl::SkipEmpty());
  const size_t keep = std::min<size_t>(lines.size(), 5);
  lines.erase(lines.begin(), lines.end() - keep);
  return absl::StrCat("; its log ends:\n    ", absl::StrJoin(lines, "\n    "));
}

constexpr int kBatchSize = 8;
constexpr int kFiles = 8;

// The ResNet-style pipeline of examples/imagenet_resnet.json at a small scale, with a `mark`
// for the at_mark cache policy.
// Splits of 4 records: tasks lease them as the client reads (4 at a time), so an epoch's plan
// is still being leased when a fault or a scaling step strikes mid-epoch.
std::string ChaosPipeline(const std::string& data_dir) {
  return absl::StrCat(R"({
  "source": {"type": "tfrecord",
             "params": {"files": [")",
                      data_dir, R"(/*.tfrecord"], "shuffle_splits": true,
                        "records_per_split": 4}},
  "ops": [
    {"op": "shuffle", "params": {"buffer_size": 64}},
    {"op": "map", "udf": "parse_example",
     "udfParams": {"keys": ["image/encoded", "image/class/label"], "dtypes": ["bytes", "int64"]}},
    {"op": "parallel_map", "params": {"num_threads": 2}, "udf": "decode_jpeg"},
    {"op": "mark", "params": {"name": "decoded"}},
    {"op": "map", "udf": "random_crop", "udfParams": {"fraction": 0.875}},
    {"op": "map", "udf": "random_flip"},
    {"op": "map", "udf": "normalize",
     "udfParams": {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}},
    {"op": "batch", "params": {"batch_size": )",
                      kBatchSize, R"(, "drop_remainder": false}},
    {"op": "prefetch", "params": {"buffer_size": 2}}
  ]
}
)");
}

absl::Status EnsureDataset(Env* env, const ChaosOptions& options) {
  const std::string done = absl::StrCat(options.data_dir, "/.complete-", options.images);
  if (env->FileExists(done)) return absl::OkStatus();
  SyntheticImagenetOptions data;
  data.out_dir = options.data_dir;
  data.images = options.images;
  data.files = kFiles;
  data.size = 32;
  data.seed = 1;
  RETURN_IF_ERROR(WriteSyntheticImagenet(env, data).status());
  return WriteStringToFile(env, done, "", /*sync=*/false);
}

// Runs a command to its end; its stdout and stderr go to `log`.
absl::Status RunToEnd(const std::vector<std::string>& argv, const std::string& log) {
  Subprocess process(argv, Subprocess::Stderr::kToFile, log);
  process.ReadAll(std::chrono::minutes(10));
  const int code = process.Wait();
  if (code == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(argv.size() > 1 ? argv[1] : argv[0], " exited with code ",
                                          code, " (see ", log, ")"));
}

// "granary failpoint … fired" lines in the logs.
int64_t CountFailpointFirings(Env* env, const std::string& logs) {
  int64_t n = 0;
  auto names = env->GetChildren(logs);
  if (!names.ok()) return 0;
  for (const std::string& name : *names) {
    auto text = ReadFileToString(env, logs + "/" + name);
    if (!text.ok()) continue;
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      if (absl::StartsWith(line, "granary failpoint ")) ++n;
    }
  }
  return n;
}

// StrJoin formatter: a digest line's rows.
void RowsOf(std::string* out, const DigestLine& line) { absl::StrAppend(out, line.rows); }

// History lines shown on each side of a violation.
constexpr int kHistoryContext = 8;

// The job the chaos client reads (and scaling steps scale).
constexpr char kChaosJobName[] = "chaos";

// The replicated scenarios' bounds (chaos_harness.h) and how often the replicas are probed.
constexpr absl::Duration kNewLeaderTimeout = absl::Seconds(30);
constexpr absl::Duration kRejoinTimeout = absl::Seconds(60);
constexpr absl::Duration kProbeInterval = absl::Milliseconds(100);

std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%.2f s", absl::ToDoubleSeconds(d));
}

// Drives one run: faults in plan order, restarts after failpoint crashes, the verdict.
class ChaosRun {
 public:
  ChaosRun(const ChaosOptions& options, ChaosPlan plan, std::FILE* out)
      : options_(options), plan_(std::move(plan)), out_(out), env_(Env::Default()) {}

  ChaosReport Run() {
    const absl::Time start = absl::Now();
    report_.faults_planned = plan_.faults.size();
    const absl::Status status = RunAndVerify();
    report_.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    report_.failpoint_firings = CountFailpointFirings(env_, options_.dir + "/logs");
    report_.passed = status.ok();
    std::string summary =
        absl::StrCat(report_.epochs_verified, " epochs, ", report_.rows_verified,
                     " rows verified, ", report_.faults_injected, "/", report_.faults_planned,
                     " faults injected, ", report_.failpoint_firings, " failpoint firings, ",
                     absl::StrFormat("%.1f s", report_.seconds));
    if (report_.longest_stall_after_faults_seconds >= 0) {
      absl::StrAppend(&summary,
                      absl::StrFormat("; the trainer stalled at most %.2f s from the first fault "
                                      "on (%.2f s before it)",
                                      report_.longest_stall_after_faults_seconds,
                                      report_.longest_stall_before_faults_seconds));
    }
    if (report_.new_leader_seconds >= 0) {
      absl::StrAppend(&summary, absl::StrFormat("; a new leader %.2f s after the leader fault",
                                                report_.new_leader_seconds));
    }
    if (status.ok()) {
      std::fprintf(out_, "PASS: %s: %s\n", ChaosCommandLine(options_).c_str(), summary.c_str());
    } else {
      std::fprintf(out_, "FAIL: %s: %s (%s)\n  logs: %s/logs\n", ChaosCommandLine(options_).c_str(),
                   std::string(status.message()).c_str(), summary.c_str(), options_.dir.c_str());
    }
    std::fflush(out_);
    return report_;
  }

 private:
  absl::Status RunAndVerify() {
    RETURN_IF_ERROR(env_->CreateDirs(options_.dir + "/logs"));
    RETURN_IF_ERROR(EnsureDataset(env_, options_));
    const std::string pipeline = options_.dir + "/pipeline.json";
    RETURN_IF_ERROR(WriteStringToFile(env_, pipeline, ChaosPipeline(options_.data_dir), false));
    const std::string policy = CachePolicyName(plan_.cache_policy);
    const std::vector<std::string> common = {
        "--pipeline=" + pipeline, absl::StrCat("--epochs=", plan_.epochs),
        absl::StrCat("--seed=", plan_.seed), "--cache_policy=" + policy};

    std::vector<std::string> local = {options_.binary, "local",
                                      "--digest_out=" + options_.dir + "/reference.jsonl"};
    local.insert(local.end(), common.begin(), common.end());
    RETURN_IF_ERROR(RunToEnd(local, options_.dir + "/logs/reference.log"));

    ChaosProcessesOptions p;
    p.binary = options_.binary;
    p.dir = options_.dir;
    p.data_root = options_.data_dir;
    p.workers = plan_.workers;
    p.standby = plan_.standby;
    p.replicas = plan_.replicas;
    p.redis_cache = options_.cache_tier == "redis";
    p.client_flags = common;
    // One element per request, one request at a time: the client pulls no faster than it
    // consumes, so the workers' progress (and checkpoints) follows the client's.
    p.client_flags.push_back(absl::StrCat("--job_name=", kChaosJobName));
    for (const char* flag : {"--stall_timeout_ms=60000", "--rpc_timeout_ms=3000",
                             "--max_outstanding_requests=1", "--max_request_bytes=1"}) {
      p.client_flags.push_back(flag);
    }
    if (plan_.consumers == 1) {
      p.client_flags.push_back("--digest_out=" + digest_file(0));
      p.client_flags.push_back("--position_file=" + position_file(0));
    } else {
      for (int i = 0; i < plan_.consumers; ++i) {
        p.consumer_flags.push_back(
            {absl::StrCat("--consumer=", i), absl::StrCat("--num_consumers=", plan_.consumers),
             "--digest_out=" + digest_file(i), "--position_file=" + position_file(i)});
      }
    }
    if (plan_.consumers > 1) {
      p.client_flags.push_back("--sharding=" + plan_.sharding);
      p.client_flags.push_back("--remainder=" + plan_.remainder);
    }
    p.client_flags.push_back(absl::StrCat("--step_ms=", options_.step_ms));
    // Small windows: workers produce (and lease splits) only a few elements ahead of the client,
    // so faults and scaling steps land while the epoch's plan is still being leased.
    p.extra_worker_flags.push_back("--window_bytes=262144");
    if (options_.testonly_break_workers) {
      p.every_worker_failpoints = absl::StrCat(kWorkerAfterResumeBeforeServe.name, "=error");
    }
    if (options_.transport == "shm") {
      p.extra_worker_flags.push_back("--local_transport=shm");
      p.extra_worker_flags.push_back("--shm_min_bytes=0");
    } else {
      p.extra_worker_flags.push_back("--local_transport=tcp");
      p.client_flags.push_back("--noshared_memory");
    }
    p.sync_ledgers = std::any_of(plan_.faults.begin(), plan_.faults.end(),
                                 [](const ChaosFault& f) { return f.power_loss.has_value(); });
    p.failpoint_process = options_.failpoint_process;
    p.failpoints = options_.failpoints;
    p.network_namespaces = IsNetworkScenario(plan_.scenario);
    if (plan_.proxies) p.proxy_seed = plan_.seed;
    p.clocks.fake_wall = StepsWallClocks(plan_.scenario);
    p.clocks.skew_env = SkewsEnvClocks(plan_.scenario);
    if (IsDiskScenario(plan_.scenario)) {
      ASSIGN_OR_RETURN(disks_, ChaosDisks::Prepare(options_.dir, plan_));
      p.disk_faults_dir = disks_->control_dir();
    }
    p.history_dir = history_dir();
    std::error_code ignored;
    std::filesystem::remove_all(p.history_dir, ignored);  // Of an earlier run in this directory.
    absl::Status verified;
    {
      ChaosProcesses processes(p);
      RETURN_IF_ERROR(processes.Start());
      std::unique_ptr<HostileTraffic> hostile;
      if (plan_.hostile_traffic) {
        HostileTrafficOptions h;
        h.dispatcher_address = processes.dispatcher_address();
        h.worker_addresses = [&processes] { return processes.ServingWorkerAddresses(); };
        h.credentials = processes.client_credentials();
        h.job_name = kChaosJobName;
        h.seed = plan_.seed;
        hostile = std::make_unique<HostileTraffic>(std::move(h));
      }
      RETURN_IF_ERROR(Drive(processes));
      verified = Verify();
      if (hostile != nullptr) {
        const absl::Status refused = CheckHostileTraffic(hostile->Stop());
        if (verified.ok()) verified = refused;
      }
    }  // Every process stopped: their histories are complete.
    const absl::Status checked = VerifyHistory();
    if (verified.ok() || checked.ok()) return verified.ok() ? checked : verified;
    return absl::DataLossError(absl::StrCat(verified.message(), "; ", checked.message()));
  }

  std::string history_dir() const { return options_.dir + "/history"; }

  // The history checker's verdict (faultinject/history_checker.h): on a violation, prints the
  // seed, the fault schedule, the command that replays the run and the first violation with
  // the history's lines around it, and returns DataLoss naming it.
  absl::Status VerifyHistory() {
    ASSIGN_OR_RETURN(const History history, ReadHistory(history_dir()));
    const std::vector<HistoryViolation> violations = CheckHistoryEvents(history);
    if (violations.empty()) {
      std::fprintf(out_, "history: %zu events, no violation\n", history.events.size());
      return absl::OkStatus();
    }
    std::fprintf(out_, "history: %zu violations in %zu events (%s); the first:\n  %s\n",
                 violations.size(), history.events.size(), history_dir().c_str(),
                 DescribeViolation(history, violations[0], kHistoryContext).c_str());
    std::fprintf(out_, "  seed %llu, scenario %s, faults:\n",
                 static_cast<unsigned long long>(plan_.seed), plan_.scenario.c_str());
    for (const ChaosFault& fault : plan_.faults) {
      std::fprintf(out_, "    %s\n", fault.Describe().c_str());
    }
    std::fprintf(out_, "  replay: %s\n", ChaosCommandLine(options_).c_str());
    std::fflush(out_);
    return absl::DataLossError(absl::StrCat("history: ", violations.size(),
                                            " violations, the first: ", violations[0].rule, ": ",
                                            violations[0].message));
  }

  // Reports the hostile traffic; an error if a server answered a request wrongly.
  absl::Status CheckHostileTraffic(const HostileTrafficReport& hostile) {
    for (const auto& [kind, n] : hostile.sent) report_.hostile_requests += n;
    report_.hostile_violations = hostile.violation_count;
    std::fprintf(out_,
                 "hostile clients: %lld requests (%lld while a server was unreachable), %lld "
                 "jobs opened and abandoned, %lld answered wrongly\n",
                 static_cast<long long>(report_.hostile_requests),
                 static_cast<long long>(hostile.unreachable),
                 static_cast<long long>(hostile.abandoned_jobs),
                 static_cast<long long>(hostile.violation_count));
    for (const std::string& violation : hostile.violations) {
      std::fprintf(out_, "  answered wrongly: %s\n", violation.c_str());
    }
    if (hostile.violation_count == 0) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        hostile.violation_count,
        " hostile request(s) answered wrongly, the first: ", hostile.violations.front()));
  }

  // Consumer i's position and digest files.
  std::string position_file(int i) const {
    return plan_.consumers == 1 ? options_.dir + "/position"
                                : absl::StrCat(options_.dir, "/position-", i);
  }
  std::string digest_file(int i) const {
    return plan_.consumers == 1 ? options_.dir + "/service.jsonl"
                                : absl::StrCat(options_.dir, "/service-", i, ".jsonl");
  }

  // Where the consumers stand together: the epoch the slowest reads, and the rows all of them
  // delivered of it. Not found until each consumer wrote its position.
  absl::StatusOr<RunPosition> Position() const {
    RunPosition together;
    together.epoch = std::numeric_limits<int64_t>::max();
    std::vector<RunPosition> each;
    for (int i = 0; i < plan_.consumers; ++i) {
      ASSIGN_OR_RETURN(RunPosition position, ReadRunPositionFile(env_, position_file(i)));
      together.epoch = std::min(together.epoch, position.epoch);
      each.push_back(std::move(position));
    }
    for (const RunPosition& position : each) {
      if (position.epoch == together.epoch) together.rows += position.rows;
    }
    return together;
  }

  bool Triggered(const ChaosFault& fault, const ChaosProcesses& processes) const {
    if (fault.after_new_leader) {
      return new_leader_.has_value() &&
             absl::Now() - last_fault_ >= absl::Milliseconds(fault.after_ms);
    }
    if (fault.after_previous) {
      return absl::Now() - last_fault_ >= absl::Milliseconds(fault.after_ms);
    }
    auto position = Position();
    if (!position.ok()) return false;  // The client has not written it yet.
    if (position->epoch < fault.epoch ||
        (position->epoch == fault.epoch && position->rows < fault.rows)) {
      return false;
    }
    return fault.checkpointer.empty() ||
           processes.CheckpointsWritten(fault.checkpointer) >= fault.checkpoints ||
           CheckpointsWaived(*position);
  }

  // A checkpointer writes only while it produces, so a fast run can end before it wrote the
  // count a fault waits for, and the fault would never strike. From a quarter of the last
  // epoch on, the fault strikes without them (Inject says so).
  bool CheckpointsWaived(const RunPosition& position) const {
    return position.epoch >= plan_.epochs - 1 && position.rows >= options_.images / 4;
  }

  // Injects `fault`; false when it cannot be yet (a scaling step while the dispatcher is down):
  // the caller tries again.
  absl::StatusOr<bool> Inject(const ChaosFault& fault, ChaosProcesses& processes) {
    if (fault.scale_to > 0) {
      const absl::Status scaled =
          processes.ScaleJob(kChaosJobName, fault.scale_to, "granary chaos: " + fault.Describe());
      if (absl::IsUnavailable(scaled)) return false;
      RETURN_IF_ERROR(scaled);
    }
    // "The leader" is asked now; while no replica leads alone (an election under way), the
    // fault waits.
    const bool strikes_leader =
        fault.cut_leader ||
        std::find(fault.victims.begin(), fault.victims.end(), kLeader) != fault.victims.end();
    if (strikes_leader) {
      const std::optional<std::string> leader = LeaderOf(processes.ProbeReplicas());
      if (!leader.has_value()) return false;
      struck_leader_ = *leader;
      new_leader_.reset();
    }
    const auto named = [this](const std::string& name) {
      return name == kLeader ? struck_leader_ : name;
    };
    const auto position = Position();
    std::string remark;
    if (strikes_leader) remark = absl::StrCat(": the leader is ", struck_leader_);
    if (!fault.checkpointer.empty() && position.ok() && CheckpointsWaived(*position) &&
        processes.CheckpointsWritten(fault.checkpointer) < fault.checkpoints) {
      remark = absl::StrCat(": ", fault.checkpointer, " had not written ", fault.checkpoints,
                            " checkpoints a quarter into the last epoch; striking anyway");
    }
    std::fprintf(out_, "  fault %lld (%s) at epoch %lld row %lld%s\n",
                 static_cast<long long>(report_.faults_injected + 1), fault.Describe().c_str(),
                 static_cast<long long>(position.ok() ? position->epoch : 0),
                 static_cast<long long>(position.ok() ? position->rows : 0), remark.c_str());
    std::fflush(out_);
    if (fault.network.has_value()) RETURN_IF_ERROR(processes.InjectNetworkFault(*fault.network));
    processes.RecordHistory("fault", absl::StrCat("number=", report_.faults_injected + 1));
    if (fault.disk.has_value()) RETURN_IF_ERROR(disks_->Apply(*fault.disk));
    std::vector<std::string> killed;
    if (fault.power_loss.has_value()) {
      // SIGKILLed, and their unsynced writes dropped, here; restarted below like any victim.
      const PowerLossFault& power = *fault.power_loss;
      ASSIGN_OR_RETURN(
          const PowerLossReport dropped,
          processes.PowerLoss(fault.victims,
                              power.torn ? std::optional(power.torn_seed) : std::nullopt));
      std::fprintf(out_, "  power loss: %s\n", dropped.Describe().c_str());
      killed = fault.victims;
    }
    for (const std::string& victim : fault.victims) {
      // "client": every consumer's.
      const std::vector<std::string> struck = processes.Expand(named(victim));
      for (const std::string& name : struck) {
        // Gone for good in an earlier fault, or a client that finished.
        if (!processes.running(name)) continue;
        processes.Kill(name);
        killed.push_back(name);
      }
    }
    if (fault.proxy.has_value()) RETURN_IF_ERROR(processes.InjectProxyFault(*fault.proxy));
    if (fault.clock.has_value()) {
      const std::string whose = named(fault.clock->process);
      RETURN_IF_ERROR(fault.clock->skew.has_value()
                          ? processes.SkewEnvClock(whose, *fault.clock->skew)
                          : processes.StepWallClock(whose, fault.clock->wall_offset_seconds));
    }
    if (fault.cut_leader) processes.CutFromEtcd(struck_leader_);
    if (fault.heal_cut) {
      processes.HealFromEtcd(struck_leader_);
      rejoining_ = struck_leader_;
    }
    if (++report_.faults_injected == 1) report_.longest_stall_after_faults_seconds = 0;
    last_fault_ = absl::Now();
    recovering_.clear();
    for (const std::string& name : fault.revive) {
      processes.Restart(named(name));
      recovering_.push_back(named(name));
      rejoining_ = named(name);
    }
    if (fault.for_good) return true;
    for (const std::string& victim : killed) {
      processes.Restart(victim);
      if (!ChaosProcesses::IsClient(victim)) recovering_.push_back(victim);
    }
    return true;
  }

  // After a fault struck the leader: notes when another replica leads alone. After a heal or a
  // revival: notes when that replica follows. Fails either past its bound.
  absl::Status WatchReplicas(ChaosProcesses& processes) {
    const bool awaiting_leader = !struck_leader_.empty() && !new_leader_.has_value();
    if ((!awaiting_leader && rejoining_.empty()) || absl::Now() - last_probe_ < kProbeInterval) {
      return absl::OkStatus();
    }
    last_probe_ = absl::Now();
    const std::map<std::string, ReplicaProbe> probes = processes.ProbeReplicas();
    if (awaiting_leader) {
      const std::optional<std::string> leader = LeaderOf(probes);
      const absl::Duration since = absl::Now() - last_fault_;
      if (leader.has_value() && *leader != struck_leader_) {
        new_leader_ = *leader;
        report_.new_leader_seconds = absl::ToDoubleSeconds(since);
        std::fprintf(out_, "  %s leads, %s after the fault on %s\n", leader->c_str(),
                     Seconds(since).c_str(), struck_leader_.c_str());
        std::fflush(out_);
      } else if (since > kNewLeaderTimeout) {
        return absl::DeadlineExceededError(
            absl::StrCat("no replica but ", struck_leader_, " led alone within ",
                         Seconds(kNewLeaderTimeout), " of the fault on it"));
      }
    }
    if (!rejoining_.empty()) {
      const auto probe = probes.find(rejoining_);
      const absl::Duration since = absl::Now() - last_fault_;
      if (probe != probes.end() && probe->second.role == ReplicaProbe::Role::kFollower) {
        std::fprintf(out_,
                     "  %s rejoined as a follower (of %s), %s after it was healed or started\n",
                     rejoining_.c_str(), probe->second.leader.c_str(), Seconds(since).c_str());
        std::fflush(out_);
        rejoining_.clear();
      } else if (since > kRejoinTimeout) {
        return absl::DeadlineExceededError(
            absl::StrCat(rejoining_, " did not rejoin as a follower within ",
                         Seconds(kRejoinTimeout), " (see ", processes.log_path(rejoining_), ")"));
      }
    }
    return absl::OkStatus();
  }

  // Notes how long the client's position has not advanced.
  void WatchStall() {
    const auto position = Position();
    if (!position.ok()) return;  // Not written yet.
    const absl::Time now = absl::Now();
    if (position->epoch != last_position_.epoch || position->rows != last_position_.rows) {
      last_position_ = *position;
      last_progress_ = now;
      return;
    }
    if (last_progress_ == absl::InfinitePast()) return;
    const double stalled = absl::ToDoubleSeconds(now - last_progress_);
    // A stall the first fault caused began at the progress that triggered it: it counts as
    // after the fault once the fault is injected.
    double& longest = report_.faults_injected == 0 ? report_.longest_stall_before_faults_seconds
                                                   : report_.longest_stall_after_faults_seconds;
    longest = std::max(longest, stalled);
  }

  // Whether the servers restarted by the last fault all serve again.
  absl::StatusOr<bool> Recovered(ChaosProcesses& processes) const {
    for (const std::string& name : recovering_) {
      ASSIGN_OR_RETURN(const bool serving, processes.Serving(name));
      if (!serving) return false;
    }
    return true;
  }

  absl::Status Drive(ChaosProcesses& processes) {
    const absl::Time deadline = absl::Now() + absl::Seconds(options_.timeout_seconds);
    size_t next = 0;
    bool client_finished = false;  // Every consumer's client.
    int clients_finished = 0;
    while (true) {
      if (client_finished) {
        // Only the replicas' checks and the faults that wait for a new leader remain to do
        // (and the heals of disruptions that outlast the client).
        const bool faults_left =
            next < plan_.faults.size() &&
            (plan_.faults[next].after_new_leader || plan_.faults[next].after_previous);
        const bool checks_left =
            !rejoining_.empty() || (!struck_leader_.empty() && !new_leader_.has_value());
        if (!faults_left && !checks_left) return absl::OkStatus();
      } else {
        WatchStall();
      }
      for (const auto& [name, code] : processes.ReapExited()) {
        if (ChaosProcesses::IsClient(name)) {
          if (code == 0) {
            client_finished = ++clients_finished == plan_.consumers;
            continue;
          }
          return absl::InternalError(absl::StrCat("the client exited with code ", code, " (see ",
                                                  processes.log_path(name), ")",
                                                  LogTail(processes.log_path(name))));
        }
        if (code != kFailpointCrashExitCode) {
          return absl::InternalError(absl::StrCat(name, " exited with code ", code, " (see ",
                                                  processes.log_path(name), ")",
                                                  LogTail(processes.log_path(name))));
        }
        std::fprintf(out_, "  %s crashed at a failpoint: restarting it\n", name.c_str());
        std::fflush(out_);
        processes.Restart(name);
      }
      for (const std::string& name : processes.names()) {
        if (!ChaosProcesses::IsClient(name)) RETURN_IF_ERROR(processes.Serving(name).status());
      }
      RETURN_IF_ERROR(WatchReplicas(processes));
      if (next < plan_.faults.size()) {
        const ChaosFault& fault = plan_.faults[next];
        // A fault during recovery strikes as soon as the restarted servers serve again.
        bool now = false;
        if (fault.during_recovery) {
          ASSIGN_OR_RETURN(now, Recovered(processes));
        } else {
          now = Triggered(fault, processes);
        }
        if (now) {
          ASSIGN_OR_RETURN(const bool injected, Inject(plan_.faults[next], processes));
          if (injected) ++next;
        }
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("the client did not finish within ", options_.timeout_seconds, " s"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  absl::Status Verify() {
    ASSIGN_OR_RETURN(const auto reference, ReadDigestFile(env_, options_.dir + "/reference.jsonl"));
    std::vector<std::map<int64_t, DigestLine>> consumers;
    for (int i = 0; i < plan_.consumers; ++i) {
      ASSIGN_OR_RETURN(auto digests, ReadDigestFile(env_, digest_file(i)));
      consumers.push_back(std::move(digests));
    }
    const bool equal_shares = plan_.consumers > 1 && plan_.sharding != "dynamic";
    std::vector<std::string> wrong, unequal;
    for (int64_t epoch = 0; epoch < plan_.epochs; ++epoch) {
      auto want = reference.find(epoch);
      if (want == reference.end()) {
        return absl::InternalError(absl::StrCat("no reference for epoch ", epoch));
      }
      // The consumers' union: the multiset digest is a wrapping sum of the row hashes.
      DigestLine g;
      std::vector<DigestLine> lines;
      std::vector<int> missing;
      for (int i = 0; i < plan_.consumers; ++i) {
        auto got = consumers[i].find(epoch);
        if (got == consumers[i].end()) {
          missing.push_back(i);
          continue;
        }
        g.rows += got->second.rows;
        g.multiset += got->second.multiset;
        g.dropped += got->second.dropped;
        lines.push_back(got->second);
      }
      if (!missing.empty()) {
        std::fprintf(out_, "epoch %lld: MISSING from the digest file of consumer(s) %s\n",
                     static_cast<long long>(epoch), absl::StrJoin(missing, ", ").c_str());
        wrong.push_back(absl::StrCat(epoch));
        continue;
      }
      const std::string by_consumer =
          plan_.consumers == 1
              ? ""
              : absl::StrCat(" (", absl::StrJoin(lines, " + ", RowsOf), " by consumer)");
      const EqualSharesVerdict shares =
          equal_shares ? CheckEqualShares(lines, plan_.remainder) : EqualSharesVerdict();
      const DigestLine& w = want->second;
      if (g.rows == w.rows && g.multiset == w.multiset) {
        std::fprintf(out_,
                     "epoch %lld: %lld rows%s, multiset %s = reference, %lld duplicates/recomputed "
                     "dropped: exactly once%s\n",
                     static_cast<long long>(epoch), static_cast<long long>(g.rows),
                     by_consumer.c_str(), HashToHex(g.multiset).c_str(),
                     static_cast<long long>(g.dropped), shares.line.c_str());
        ++report_.epochs_verified;
        report_.rows_verified += g.rows;
      } else {
        std::fprintf(out_,
                     "epoch %lld: MISMATCH: %lld rows%s, multiset %s; reference %lld rows, "
                     "multiset %s%s\n",
                     static_cast<long long>(epoch), static_cast<long long>(g.rows),
                     by_consumer.c_str(), HashToHex(g.multiset).c_str(),
                     static_cast<long long>(w.rows), HashToHex(w.multiset).c_str(),
                     shares.line.c_str());
        wrong.push_back(absl::StrCat(epoch));
      }
      if (!shares.wrong.empty()) {
        std::fprintf(out_, "epoch %lld: UNEQUAL SHARES: %s\n", static_cast<long long>(epoch),
                     shares.wrong.c_str());
        unequal.push_back(absl::StrCat(epoch, " (", shares.wrong, ")"));
      }
    }
    std::vector<std::string> failures;
    if (!wrong.empty()) {
      failures.push_back(absl::StrCat("not exactly once in epoch(s) ", absl::StrJoin(wrong, ", ")));
    }
    if (!unequal.empty()) {
      failures.push_back(absl::StrCat("remainder ", plan_.remainder, " broken in epoch(s) ",
                                      absl::StrJoin(unequal, ", ")));
    }
    if (!failures.empty()) return absl::DataLossError(absl::StrJoin(failures, "; "));
    return absl::OkStatus();
  }

  const ChaosOptions& options_;
  const ChaosPlan plan_;
  // The disk scenarios' disks; outlives the processes RunAndVerify starts.
  std::unique_ptr<ChaosDisks> disks_;
  std::FILE* const out_;
  Env* const env_;
  ChaosReport report_;
  std::vector<std::string> recovering_;  // Servers the last fault restarted.
  absl::Time last_fault_ = absl::InfinitePast();
  // The client's last position seen to change, and when.
  RunPosition last_position_;
  absl::Time last_progress_ = absl::InfinitePast();
  // The replicated scenarios: the replica the last leader fault struck, the one seen leading
  // alone after it (none yet: nullopt), one that must rejoin as a follower ("": none), and when
  // the replicas were last probed.
  std::string struck_leader_;
  std::optional<std::string> new_leader_;
  std::string rejoining_;
  absl::Time last_probe_ = absl::InfinitePast();
};

}  // namespace

EqualSharesVerdict CheckEqualShares(const std::vector<DigestLine>& lines,
                                    const std::string& remainder) {
  const auto joined = [&lines](int64_t DigestLine::*field, const char* separator) {
    return absl::StrJoin(lines, separator, [field](std::string* out, const DigestLine& line) {
      absl::StrAppend(out, line.*field);
    });
  };
  const auto any_nonzero = [&lines](int64_t DigestLine::*field) {
    return std::any_of(lines.begin(), lines.end(),
                       [field](const DigestLine& line) { return line.*field != 0; });
  };
  const bool steps_differ = std::any_of(lines.begin(), lines.end(), [&lines](const DigestLine& l) {
    return l.steps != lines.front().steps;
  });
  const std::string padding = joined(&DigestLine::padding, " + ");
  const std::string dropped = joined(&DigestLine::remainder_dropped, " + ");
  EqualSharesVerdict verdict;
  verdict.line = absl::StrCat("; steps ", joined(&DigestLine::steps, steps_differ ? " / " : " = "),
                              ", padding ", padding, ", remainder dropped ", dropped);
  if (steps_differ && remainder != "uneven") {
    verdict.wrong = absl::StrCat("steps ", joined(&DigestLine::steps, ", "), " by consumer differ");
  } else if (remainder == "pad" && any_nonzero(&DigestLine::remainder_dropped)) {
    verdict.wrong = absl::StrCat("remainder dropped ", dropped, " under pad");
  } else if (remainder == "drop" && any_nonzero(&DigestLine::padding)) {
    verdict.wrong = absl::StrCat("padding ", padding, " under drop");
  }
  return verdict;
}

std::string ChaosCommandLine(const ChaosOptions& options) {
  std::string line =
      absl::StrCat("granary chaos --scenario ", options.scenario, " --seed ", options.seed,
                   " --workers ", options.workers, " --epochs ", options.epochs);
  if (!options.cache_policy.empty()) absl::StrAppend(&line, " --cache ", options.cache_policy);
  if (!options.failpoints.empty()) {
    absl::StrAppend(&line, " --inject '", options.failpoint_process, ":", options.failpoints, "'");
  }
  const ChaosOptions defaults;
  if (options.images != defaults.images) absl::StrAppend(&line, " --images ", options.images);
  if (options.step_ms != defaults.step_ms) absl::StrAppend(&line, " --step_ms ", options.step_ms);
  if (options.testonly_break_workers) absl::StrAppend(&line, " --testonly_break_workers");
  if (options.transport != defaults.transport) {
    absl::StrAppend(&line, " --transport ", options.transport);
  }
  if (options.hostile) absl::StrAppend(&line, " --hostile");
  if (options.cache_tier != defaults.cache_tier) {
    absl::StrAppend(&line, " --cache_tier ", options.cache_tier);
  }
  if (options.consumers != defaults.consumers) {
    absl::StrAppend(&line, " --consumers ", options.consumers);
  }
  if (!options.remainder.empty()) absl::StrAppend(&line, " --remainder ", options.remainder);
  return line;
}

ChaosReport RunChaos(const ChaosOptions& options, std::FILE* out) {
  absl::StatusOr<ChaosPlan> plan = MakeChaosPlan(options.scenario, options.seed, options.workers,
                                                 options.epochs, options.images);
  if (plan.ok() && !options.cache_policy.empty()) {
    auto policy = ParseCachePolicy(options.cache_policy);
    if (policy.ok()) {
      plan->cache_policy = *policy;
    } else {
      plan = policy.status();
    }
  }
  if (plan.ok() && options.cache_tier != "files" && options.cache_tier != "redis") {
    plan = absl::InvalidArgumentError(
        absl::StrCat("--cache_tier '", options.cache_tier, "': expected files or redis"));
  }
  if (plan.ok() && options.cache_tier == "redis" && IsNetworkScenario(options.scenario)) {
    // The redis-server listens on the host's loopback, which no network namespace reaches.
    plan = absl::InvalidArgumentError(absl::StrCat(
        "--cache_tier redis: not with the network scenario ", options.scenario,
        " (its processes run in network namespaces that do not reach the host's loopback)"));
  }
  if (plan.ok() && (options.consumers < 1 || options.consumers > 16)) {
    plan = absl::InvalidArgumentError(
        absl::StrCat("--consumers ", options.consumers, ": expected 1 to 16"));
  }
  if (plan.ok()) {
    if (plan->consumers == 0) {
      plan->consumers = options.consumers;
    } else if (options.consumers != ChaosOptions().consumers) {
      plan = absl::InvalidArgumentError(absl::StrCat("--consumers ", options.consumers,
                                                     ": the scenario ", options.scenario,
                                                     " draws its consumers from the seed"));
    }
  }
  if (plan.ok() && !options.remainder.empty()) {
    if (options.remainder != "pad" && options.remainder != "drop" &&
        options.remainder != "uneven") {
      plan = absl::InvalidArgumentError(
          absl::StrCat("--remainder '", options.remainder, "': expected pad, drop or uneven"));
    } else if (plan->consumers < 2) {
      plan = absl::InvalidArgumentError(
          absl::StrCat("--remainder ", options.remainder,
                       ": needs more than one consumer (--consumers, or the scenario "
                       "equal_shares)"));
    } else {
      plan->remainder = options.remainder;
    }
  }
  if (plan.ok() && options.hostile) {
    if (plan->replicas > 0) {
      plan = absl::InvalidArgumentError(absl::StrCat(
          "--hostile: not with the replicated dispatcher's scenario ", options.scenario));
    } else {
      plan->hostile_traffic = true;
    }
  }
  if (plan.ok() && !options.failpoints.empty()) {
    absl::Status spec = CheckFailpointSpec(options.failpoints);
    const std::string& process = options.failpoint_process;
    bool known = process == "client" || process == "workers" ||
                 (plan->replicas == 0 && process == "dispatcher");
    for (int i = 0; i < plan->workers + plan->standby; ++i) {
      known = known || process == absl::StrCat("worker-", i);
    }
    for (int i = 0; i < plan->replicas; ++i) {
      known = known || process == absl::StrCat("replica-", i);
    }
    if (!known) {
      spec = absl::InvalidArgumentError(absl::StrCat(
          "--inject: no process '", process, "' to arm (",
          plan->replicas == 0 ? "dispatcher"
                              : absl::StrCat("replica-0 to replica-", plan->replicas - 1),
          ", client, workers or worker-N of this scenario's workers)"));
    }
    if (!spec.ok()) plan = spec;
  }
  if (plan.ok() && IsNetworkScenario(options.scenario) && ::geteuid() != 0) {
    plan = absl::FailedPreconditionError(
        absl::StrCat("chaos scenario ", options.scenario,
                     " needs root: it runs every process in a network namespace of its own"));
  }
  if (!plan.ok()) {
    std::fprintf(out, "FAIL: %s: %s\n", ChaosCommandLine(options).c_str(),
                 std::string(plan.status().message()).c_str());
    return ChaosReport();
  }
  std::fprintf(
      out,
      "granary chaos: scenario %s, seed %llu, %s%d workers + %d standby, %d consumer%s%s, %lld "
      "epochs of %lld rows, cache %s%s%s%s\n",
      plan->scenario.c_str(), static_cast<unsigned long long>(plan->seed),
      plan->replicas == 0
          ? ""
          : absl::StrCat(plan->replicas, " dispatcher replicas over 3 etcd members, ").c_str(),
      plan->workers, plan->standby, plan->consumers, plan->consumers == 1 ? "" : "s",
      plan->consumers == 1
          ? ""
          : absl::StrCat(" (sharding ", plan->sharding, ", remainder ", plan->remainder, ")")
                .c_str(),
      static_cast<long long>(plan->epochs), static_cast<long long>(options.images),
      CachePolicyName(plan->cache_policy).c_str(), options.cache_tier == "redis" ? " on Redis" : "",
      options.failpoints.empty()
          ? ""
          : absl::StrCat(", failpoints ", options.failpoints, " in ", options.failpoint_process)
                .c_str(),
      plan->hostile_traffic ? ", hostile clients alongside" : "");
  for (const ChaosFault& fault : plan->faults) {
    std::fprintf(out, "  plan: %s\n", fault.Describe().c_str());
  }
  std::fflush(out);
  return ChaosRun(options, *std::move(plan), out).Run();
}

}  // namespace granary
