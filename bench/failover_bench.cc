// Failover time of the replicated dispatcher (issue 32): a real 3-member etcd (Debian's etcd,
// heartbeat 50 ms, election 400 ms: testing/etcd_test_cluster.h) and three `granary dispatcher
// --journal etcd://... --replica_id replica-N --lease_ttl S` processes (tests/local_cluster.h;
// each restart comes back at the same address), a registered dataset and a job. Each round:
// waits a random moment (seeded), SIGKILLs the leading replica and times the kill -> the first
// successful state-changing RPC (GetOrCreateJob of a new named job), tried every 5 ms through
// DispatcherTargets following redirects, with the client library's channel arguments; then
// restarts the killed replica and waits until it follows the new leader (it has applied a record
// committed after its restart) before the next round.
// Then the stall a trainer sees: in each of --stall_kills epochs read through two workers, the
// leader is killed at a random moment; the longest gap between delivered elements after the kill.
//
//   bench/failover_bench [--failovers 100] [--stall_kills 10] [--lease_ttl 1] [--seed 1] [--dir D]
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_report.h"
#include "bench/sample_stats.h"
#include "client/connection.h"
#include "common/dispatcher_targets.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "granary/client.h"
#include "grpcpp/security/credentials.h"
#include "obs/http_get.h"
#include "pipeline/pipeline_loader.h"
#include "replication/etcd_journal.h"
#include "testing/etcd_test_cluster.h"
#include "testing/exposition_parser.h"
#include "tests/local_cluster.h"

ABSL_FLAG(int, failovers, 100, "Leader kills timed (--quick: 3).");
ABSL_FLAG(int64_t, lease_ttl, 1, "Each replica's --lease_ttl (seconds).");
ABSL_FLAG(int, stall_kills, 10, "Leader kills while a trainer reads an epoch (--quick: 1).");
ABSL_FLAG(uint64_t, seed, 1, "Seeds the moments of the kills.");
ABSL_FLAG(std::string, dir, "/tmp/granary_failover_bench", "Scratch directory (wiped).");

namespace granary {
namespace {

constexpr char kPrefix[] = "/granary-failover-bench";
constexpr absl::Duration kPoll = absl::Milliseconds(5);
// The trainer's epochs: 3000 batches of 64 rows, 5 batches per split, read at about 1 ms per
// batch (a training step), so that an epoch outlasts a kill and its failover.
constexpr int64_t kBatchRows = 64;
constexpr int64_t kBatchesPerSplit = 5;
constexpr int64_t kEpochBatches = 3000;
constexpr absl::Duration kTrainingStep = absl::Milliseconds(1);
// Longer than any failover or rejoin the bench expects: past it, the round fails.
constexpr absl::Duration kGiveUp = absl::Seconds(60);
// The kill comes this long after the previous round's rejoin, uniformly at random: the moments
// cover the leader's keep-alive cycle (a third of the lease TTL).
constexpr int64_t kMaxKillDelayMs = 1000;

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return context;
}

// The replicas and what the bench calls them with.
class ReplicatedDispatcher {
 public:
  ReplicatedDispatcher(testing::LocalCluster* cluster, std::unique_ptr<DispatcherTargets> targets,
                       std::unique_ptr<etcd::EtcdClient> etcd, std::unique_ptr<EtcdJournal> journal)
      : cluster_(cluster),
        targets_(std::move(targets)),
        etcd_(std::move(etcd)),
        journal_(std::move(journal)) {}

  // One attempt of `rpc` through the targets (following redirects).
  absl::Status CallOnce(const DispatcherTargets::Rpc& rpc) {
    return FromGrpcStatus(targets_->Call(Context, rpc));
  }

  // `rpc` retried every kPoll while Unavailable or DeadlineExceeded, for at most kGiveUp.
  absl::Status Call(const DispatcherTargets::Rpc& rpc) {
    const absl::Time give_up = absl::Now() + kGiveUp;
    for (;;) {
      const absl::Status status = CallOnce(rpc);
      if (!absl::IsUnavailable(status) && !absl::IsDeadlineExceeded(status)) return status;
      if (absl::Now() > give_up) {
        return Annotate(status,
                        absl::StrCat("no leader answered within ", absl::FormatDuration(kGiveUp)));
      }
      absl::SleepFor(kPoll);
    }
  }

  // A journaled state change: GetOrCreateJob of a job named `name` not created before.
  absl::Status CreateJob(const std::string& name, bool once) {
    GetOrCreateJobRequest request;
    request.set_dataset_id(dataset_id_);
    request.set_name(name);
    GetOrCreateJobResponse response;
    const DispatcherTargets::Rpc rpc = [&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
      return stub.GetOrCreateJob(context, request, &response);
    };
    return once ? CallOnce(rpc) : Call(rpc);
  }

  absl::Status RegisterDataset() {
    ASSIGN_OR_RETURN(PipelineDef def,
                     ParsePipelineJson(R"({"source": {"type": "range", "params": {"stop": 1000}}})",
                                       "failover_bench"));
    RegisterDatasetRequest request;
    *request.mutable_pipeline() = def;
    RegisterDatasetResponse response;
    RETURN_IF_ERROR(Call([&](Dispatcher::Stub& stub, grpc::ClientContext* context) {
      return stub.RegisterDataset(context, request, &response);
    }));
    dataset_id_ = response.dataset_id();
    return absl::OkStatus();
  }

  // Restarts the killed replica `replica` (at its address) and waits until it follows the
  // leader: commits records (jobs named "<name>-<n>") until the replica reports one applied
  // (granary_dispatcher_follower_applied_seq on its /metrics) — a record committed after it
  // restarted, so its recovery is over.
  absl::Status Rejoin(int replica, const std::string& name) {
    if (!cluster_->RestartDispatcher(replica)) {
      return absl::UnavailableError(
          absl::StrCat("replica ", replica, " did not restart at its address (", name, ")"));
    }
    const absl::Time give_up = absl::Now() + kGiveUp;
    for (int n = 0; absl::Now() < give_up; ++n) {
      RETURN_IF_ERROR(CreateJob(absl::StrCat(name, "-", n), /*once=*/false));
      ASSIGN_OR_RETURN(const uint64_t last, journal_->LastSeq());
      const absl::Time next_record = absl::Now() + absl::Milliseconds(200);
      while (absl::Now() < next_record) {
        absl::StatusOr<HttpGetResult> page =
            HttpGet("127.0.0.1", cluster_->dispatcher_metrics_port(replica), "/metrics");
        if (page.ok() && page->status == 200) {
          ASSIGN_OR_RETURN(const Exposition metrics, ParseExposition(page->body));
          if (metrics.Sum("granary_dispatcher_follower_applied_seq") >= static_cast<double>(last)) {
            return absl::OkStatus();
          }
        }
        absl::SleepFor(kPoll);
      }
    }
    return absl::DeadlineExceededError(absl::StrCat(
        "replica ", replica, " did not follow the leader within ", absl::FormatDuration(kGiveUp)));
  }

 private:
  testing::LocalCluster* const cluster_;
  const std::unique_ptr<DispatcherTargets> targets_;
  const std::unique_ptr<etcd::EtcdClient> etcd_;  // the journal's
  const std::unique_ptr<EtcdJournal> journal_;    // read only: LastSeq
  std::string dataset_id_;
};

// Reads epoch `epoch` of `job` at one element per kTrainingStep; the time each element came.
absl::StatusOr<std::vector<absl::Time>> ReadPaced(Job& job, int64_t epoch) {
  ASSIGN_OR_RETURN(std::unique_ptr<EpochReader> reader, job.ReadEpoch(epoch));
  std::vector<absl::Time> delivered;
  for (;;) {
    ReceivedElement element;
    bool end = false;
    RETURN_IF_ERROR(reader->Next(&element, &end));
    if (end) return delivered;
    delivered.push_back(absl::Now());
    absl::SleepFor(kTrainingStep);
  }
}

// The trainer-visible stall of each of `kills` failovers: a trainer reads an epoch through the
// workers while the leader is SIGKILLed at a random moment of it; the stall is the longest gap
// between two consecutive elements, the second delivered after the kill. The killed replica rejoins
// after the epoch.
absl::StatusOr<std::vector<double>> MeasureStalls(testing::LocalCluster& cluster,
                                                  ReplicatedDispatcher& dispatcher, int kills,
                                                  std::mt19937_64& random) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<Client> client,
      Client::Connect({.dispatcher_address = cluster.dispatcher_address(), .insecure = true}));
  ASSIGN_OR_RETURN(
      PipelineDef def,
      ParsePipelineJson(
          absl::StrCat(R"({"source": {"type": "range", "params": {"stop": )",
                       kEpochBatches * kBatchRows, R"(, "elements_per_split": )",
                       kBatchesPerSplit * kBatchRows, R"(}}, "ops": [{"op": "batch", "params": )",
                       R"({"batch_size": )", kBatchRows, "}}]}"),
          "failover_bench trainer"));
  ASSIGN_OR_RETURN(const std::string dataset, client->RegisterPipeline(def));
  ASSIGN_OR_RETURN(std::unique_ptr<Job> job, client->OpenJob(dataset, {.name = "trainer"}));
  // The kill comes 0.5-1.5 s into the epoch, which lasts at least 3 s.
  std::uniform_int_distribution<int64_t> kill_after_ms(500, 1500);
  std::vector<double> stalls;
  for (int epoch = 0; epoch < kills; ++epoch) {
    absl::StatusOr<std::vector<absl::Time>> delivered;
    std::thread trainer([&] { delivered = ReadPaced(*job, epoch); });
    absl::SleepFor(absl::Milliseconds(kill_after_ms(random)));
    const int leader = cluster.LeaderReplica(kGiveUp);
    const absl::Time killed = absl::Now();
    if (leader >= 0) cluster.StopDispatcher(SIGKILL, leader);
    trainer.join();
    if (leader < 0) return absl::UnavailableError(absl::StrCat("epoch ", epoch, ": no leader"));
    RETURN_IF_ERROR(Annotate(delivered.status(), absl::StrCat("epoch ", epoch)));
    if (delivered->empty() || delivered->back() < killed) {
      return absl::InternalError(
          absl::StrCat("epoch ", epoch, " ended before its leader was killed"));
    }
    absl::Duration stall;
    for (size_t i = 1; i < delivered->size(); ++i) {
      if ((*delivered)[i] >= killed) stall = std::max(stall, (*delivered)[i] - (*delivered)[i - 1]);
    }
    stalls.push_back(absl::ToDoubleSeconds(stall));
    std::fprintf(stderr, "trainer stall %d: replica %d killed, %.3f s\n", epoch, leader,
                 stalls.back());
    RETURN_IF_ERROR(dispatcher.Rejoin(leader, absl::StrCat("stall-rejoin-", epoch)));
  }
  return stalls;
}

absl::Status Run() {
  const int failovers = QuickBench() ? 3 : absl::GetFlag(FLAGS_failovers);
  const int stall_kills = QuickBench() ? 1 : absl::GetFlag(FLAGS_stall_kills);
  const int64_t lease_ttl = absl::GetFlag(FLAGS_lease_ttl);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  if (failovers < 1 || stall_kills < 1) {
    return absl::InvalidArgumentError("--failovers and --stall_kills must be at least 1");
  }
  const std::string dir = absl::GetFlag(FLAGS_dir);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  testing::EtcdTestCluster::Options etcd_options;
  etcd_options.members = 3;
  ASSIGN_OR_RETURN(std::unique_ptr<testing::EtcdTestCluster> etcd,
                   testing::EtcdTestCluster::Start(etcd_options));
  testing::LocalCluster cluster(
      dir + "/cluster",
      testing::LocalClusterOptions{
          .workers = 2,
          // Workers keep little ahead of the trainer, so splits are leased while it reads.
          .worker_flags = {"--window_bytes=4096"},
          .dispatcher_flags = {absl::StrCat("--lease_ttl=", lease_ttl), "--metrics_port=0"},
          .etcd_journal = absl::StrCat("etcd://", absl::StrJoin(etcd->endpoints(), ","), kPrefix),
          .replicas = 3});
  if (!cluster.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the replicas did not start (logs in ", dir, "/cluster/logs)"));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<DispatcherTargets> targets,
      DispatcherTargets::Create(cluster.dispatcher_address(), "the replicas",
                                grpc::InsecureChannelCredentials(), ClientChannelArguments()));
  ASSIGN_OR_RETURN(std::unique_ptr<etcd::EtcdClient> etcd_client,
                   etcd::EtcdClient::Create(etcd->ClientOptions()));
  EtcdJournalOptions journal_options;
  journal_options.prefix = kPrefix;
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdJournal> journal,
                   EtcdJournal::Open(etcd_client.get(), journal_options));
  ReplicatedDispatcher dispatcher(&cluster, std::move(targets), std::move(etcd_client),
                                  std::move(journal));
  RETURN_IF_ERROR(dispatcher.RegisterDataset());
  RETURN_IF_ERROR(dispatcher.CreateJob("job", /*once=*/false));

  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int64_t> kill_delay_ms(0, kMaxKillDelayMs);
  std::vector<double> failover_seconds;
  for (int round = 0; round < failovers; ++round) {
    const int leader = cluster.LeaderReplica(kGiveUp);
    if (leader < 0) return absl::UnavailableError(absl::StrCat("round ", round, ": no leader"));
    absl::SleepFor(absl::Milliseconds(kill_delay_ms(random)));
    const absl::Time killed = absl::Now();
    cluster.StopDispatcher(SIGKILL, leader);
    const std::string job = absl::StrCat("failover-", round);
    for (;;) {
      const absl::Status created = dispatcher.CreateJob(job, /*once=*/true);
      if (created.ok()) break;
      if (!absl::IsUnavailable(created) && !absl::IsDeadlineExceeded(created)) return created;
      if (absl::Now() - killed > kGiveUp) {
        return Annotate(created,
                        absl::StrCat("round ", round, " (seed ", seed, "): no leader within ",
                                     absl::FormatDuration(kGiveUp)));
      }
      absl::SleepFor(kPoll);
    }
    failover_seconds.push_back(absl::ToDoubleSeconds(absl::Now() - killed));
    std::fprintf(stderr, "failover %d: replica %d killed, %.3f s\n", round, leader,
                 failover_seconds.back());
    RETURN_IF_ERROR(dispatcher.Rejoin(leader, absl::StrCat("rejoin-", round)));
  }

  ASSIGN_OR_RETURN(const std::vector<double> stall_seconds,
                   MeasureStalls(cluster, dispatcher, stall_kills, random));

  BenchReport report("failover",
                     absl::StrCat("Replicated dispatcher: leader SIGKILL -> first committed RPC (3 "
                                  "replicas, 3 etcd members, --lease_ttl ",
                                  lease_ttl, ")"),
                     failovers);
  report.AddSeries("failover time", "s", failover_seconds);
  report.AddHeadline("failover time p50", Quantile(failover_seconds, 0.5), "s");
  report.AddHeadline("failover time p90", Quantile(failover_seconds, 0.9), "s");
  report.AddHeadline("failover time p99", Quantile(failover_seconds, 0.99), "s",
                     BenchTarget::AtMost(2));
  report.AddHeadline("failover time max", Quantile(failover_seconds, 1.0), "s");
  report.AddSeries("trainer stall", "s", stall_seconds);
  report.AddHeadline("trainer stall p99", Quantile(stall_seconds, 0.99), "s",
                     BenchTarget::AtMost(3));
  report.AddHeadline("trainer stall max", Quantile(stall_seconds, 1.0), "s");
  report.AddHeadline("lease TTL", static_cast<double>(lease_ttl), "s");
  report.AddNote(absl::StrCat(
      "Seed ", seed, "; each kill comes 0-", kMaxKillDelayMs,
      " ms (uniform) after the previous round's killed replica rejoined; the state-changing RPC is "
      "GetOrCreateJob of a new job, tried every 5 ms through DispatcherTargets; etcd heartbeat ",
      etcd_options.heartbeat_ms, " ms, election ", etcd_options.election_ms, " ms."));
  report.AddNote(absl::StrCat(
      "Trainer stall: ", stall_kills, " epochs of ", kEpochBatches, " batches of ", kBatchRows,
      " rows (", kBatchesPerSplit,
      " batches per split) read through 2 workers (--window_bytes=4096, requests of at most 1 "
      "KiB: splits are leased as the trainer reads) at one batch per ms; in each, the leader is "
      "killed 0.5-1.5 s in; the stall is the longest gap between consecutive batches, the "
      "second delivered after the kill."));
  std::filesystem::remove_all(dir);
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "failover_bench", granary::Run);
}
