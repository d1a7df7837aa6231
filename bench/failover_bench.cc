// Failover time of the replicated dispatcher (issue 32): a real 3-member etcd (Debian's etcd,
// heartbeat 50 ms, election 400 ms: testing/etcd_test_cluster.h) and three `granary dispatcher
// --journal etcd://... --replica_id replica-N --lease_ttl S` processes (tests/local_cluster.h;
// each restart comes back at the same address), a registered dataset and a job. Each round:
// waits a random moment (seeded), SIGKILLs the leading replica and times the kill -> the first
// successful state-changing RPC (GetOrCreateJob of a new named job), tried every 5 ms through
// DispatcherTargets following redirects, with the client library's channel arguments; then
// restarts the killed replica and waits until it follows the new leader (it has applied a record
// committed after its restart) before the next round.
// Then the stall a trainer sees when it needs the dispatcher during a failover: in each of
// --stall_kills rounds a trainer reads three short epochs back to back through two workers, and
// the leader is killed a few batches (random, seeded) before the second epoch ends, so the
// trainer's StartEpoch of the third — and its workers' first leases of it — must wait for the new
// leader; the stall is the longest gap between consecutive delivered batches after the kill, next
// to the gap at the first boundary, where nothing was killed.
//
//   bench/failover_bench [--failovers 100] [--stall_kills 100] [--lease_ttl 1] [--seed 1] [--dir D]
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
#include "absl/synchronization/notification.h"
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
ABSL_FLAG(int, stall_kills, 100,
          "Leader kills just before a trainer starts its next epoch (--quick: 1).");
ABSL_FLAG(uint64_t, seed, 1, "Seeds the moments of the kills.");
ABSL_FLAG(std::string, dir, "/tmp/granary_failover_bench", "Scratch directory (wiped).");

namespace granary {
namespace {

constexpr char kPrefix[] = "/granary-failover-bench";
constexpr absl::Duration kPoll = absl::Milliseconds(5);
// The trainer's epochs: 300 batches of 64 rows, 5 batches per split, read at about 1 ms per
// batch (a training step).
constexpr int64_t kBatchRows = 64;
constexpr int64_t kBatchesPerSplit = 5;
constexpr int64_t kEpochBatches = 300;
constexpr absl::Duration kTrainingStep = absl::Milliseconds(1);
// The leader is killed when the trainer receives the batch this many batches before its epoch's
// last, uniformly at random from 1 to this: a few training steps before it starts the next epoch.
constexpr int64_t kMaxKillLeadBatches = 20;
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

// Reads epoch `epoch` of `job` at one element per kTrainingStep, appending the time each
// element came to `delivered`; notifies `reached`, if not null, once element `reached_at` came.
absl::Status ReadPaced(Job& job, int64_t epoch, std::vector<absl::Time>* delivered,
                       int64_t reached_at = -1, absl::Notification* reached = nullptr) {
  ASSIGN_OR_RETURN(std::unique_ptr<EpochReader> reader, job.ReadEpoch(epoch));
  for (int64_t index = 0;; ++index) {
    ReceivedElement element;
    bool end = false;
    RETURN_IF_ERROR(reader->Next(&element, &end));
    if (end) return absl::OkStatus();
    delivered->push_back(absl::Now());
    if (index == reached_at) reached->Notify();
    absl::SleepFor(kTrainingStep);
  }
}

// What the trainer saw in each failover round (seconds).
struct TrainerGaps {
  // The longest gap between consecutive batches, the second delivered after the kill.
  std::vector<double> stalls;
  // The gap at the round's first epoch boundary, where nothing was killed.
  std::vector<double> quiet_boundaries;
};

// `kills` failovers that the trainer must wait for: in each round it reads epochs 3k, 3k+1 and
// 3k+2 of one job back to back, and the leader is SIGKILLed when it receives the batch
// kMaxKillLeadBatches or fewer (at least 1) before the end of epoch 3k+1, so it asks a dead
// leader to start epoch 3k+2. The killed replica rejoins after the round.
absl::StatusOr<TrainerGaps> MeasureStalls(testing::LocalCluster& cluster,
                                          ReplicatedDispatcher& dispatcher, int kills,
                                          std::mt19937_64& random, uint64_t seed) {
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
  std::uniform_int_distribution<int64_t> kill_lead(1, kMaxKillLeadBatches);
  TrainerGaps gaps;
  for (int round = 0; round < kills; ++round) {
    const std::string name = absl::StrCat("stall round ", round, " (seed ", seed, ")");
    const int leader = cluster.LeaderReplica(kGiveUp);
    if (leader < 0) return absl::UnavailableError(absl::StrCat(name, ": no leader"));
    const int64_t lead = kill_lead(random);
    const int64_t first_epoch = 3 * int64_t{round};
    std::vector<absl::Time> delivered;
    absl::Notification near_boundary;
    absl::Status read;
    std::thread trainer([&] {
      read = ReadPaced(*job, first_epoch, &delivered);
      if (read.ok()) {
        read =
            ReadPaced(*job, first_epoch + 1, &delivered, kEpochBatches - 1 - lead, &near_boundary);
      }
      if (read.ok()) read = ReadPaced(*job, first_epoch + 2, &delivered);
      if (!near_boundary.HasBeenNotified()) near_boundary.Notify();  // a read failed
    });
    near_boundary.WaitForNotification();
    const absl::Time killed = absl::Now();
    cluster.StopDispatcher(SIGKILL, leader);
    trainer.join();
    RETURN_IF_ERROR(Annotate(read, name));
    if (delivered.size() != 3 * kEpochBatches) {
      return absl::InternalError(absl::StrCat(name, ": the trainer received ", delivered.size(),
                                              " batches of 3 epochs, not ", 3 * kEpochBatches));
    }
    if (killed >= delivered[2 * kEpochBatches - 1]) {
      return absl::InternalError(absl::StrCat(
          name,
          ": the leader was killed after the second epoch's last batch came, so the trainer "
          "may not have needed the dispatcher"));
    }
    absl::Duration stall;
    for (size_t i = 1; i < delivered.size(); ++i) {
      if (delivered[i] >= killed) stall = std::max(stall, delivered[i] - delivered[i - 1]);
    }
    gaps.stalls.push_back(absl::ToDoubleSeconds(stall));
    gaps.quiet_boundaries.push_back(
        absl::ToDoubleSeconds(delivered[kEpochBatches] - delivered[kEpochBatches - 1]));
    std::fprintf(stderr,
                 "trainer stall %d: replica %d killed %lld batches before an epoch's end, %.3f s "
                 "(the boundary before, with no kill: %.3f s)\n",
                 round, leader, static_cast<long long>(lead), gaps.stalls.back(),
                 gaps.quiet_boundaries.back());
    RETURN_IF_ERROR(dispatcher.Rejoin(leader, absl::StrCat("stall-rejoin-", round)));
  }
  return gaps;
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

  ASSIGN_OR_RETURN(const TrainerGaps gaps,
                   MeasureStalls(cluster, dispatcher, stall_kills, random, seed));

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
  report.AddSeries("trainer stall", "s", gaps.stalls);
  report.AddSeries("epoch boundary without a kill", "s", gaps.quiet_boundaries);
  report.AddHeadline("trainer stall p50", Quantile(gaps.stalls, 0.5), "s");
  report.AddHeadline("trainer stall p99", Quantile(gaps.stalls, 0.99), "s", BenchTarget::AtMost(3));
  report.AddHeadline("trainer stall max", Quantile(gaps.stalls, 1.0), "s");
  report.AddHeadline("epoch boundary without a kill p50", Quantile(gaps.quiet_boundaries, 0.5),
                     "s");
  report.AddHeadline("lease TTL", static_cast<double>(lease_ttl), "s");
  report.AddNote(absl::StrCat(
      "Seed ", seed, "; each kill comes 0-", kMaxKillDelayMs,
      " ms (uniform) after the previous round's killed replica rejoined; the state-changing RPC is "
      "GetOrCreateJob of a new job, tried every 5 ms through DispatcherTargets; etcd heartbeat ",
      etcd_options.heartbeat_ms, " ms, election ", etcd_options.election_ms, " ms."));
  report.AddNote(absl::StrCat(
      "Trainer stall: ", stall_kills, " rounds of 3 epochs of ", kEpochBatches, " batches of ",
      kBatchRows, " rows (", kBatchesPerSplit,
      " batches per split) read back to back through 2 workers (--window_bytes=4096) at one "
      "batch per ms; in each, the leader is killed when the trainer receives the batch 1-",
      kMaxKillLeadBatches,
      " (uniform) before the second epoch's last, so its StartEpoch of the third waits for the "
      "new leader; the stall is the longest gap between consecutive batches, the second "
      "delivered after the kill; 'epoch boundary without a kill' is the gap between the round's "
      "first two epochs."));
  std::filesystem::remove_all(dir);
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "failover_bench", granary::Run);
}
