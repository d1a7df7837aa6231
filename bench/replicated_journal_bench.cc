// The replicated dispatcher's journal (issue 32) against the single-node one, same run: 8 threads
// register workers through a DispatcherImpl (one journal record per call, group-committed), over
// two journals, interleaved per repetition:
//   - "etcd": an EtcdJournal on a real 3-member etcd on loopback (testing/etcd_test_cluster.h,
//     Debian's etcd), fenced by an election key the bench creates, as an elected replica's is;
//     each Txn carries up to 100 records;
//   - "RocksDB": the local journal (synced writes, real fsync), as a single dispatcher's.
// Each repetition starts on a fresh journal (a new etcd prefix, a new directory). Prints
// appends/s of both, etcd/RocksDB (the target: at least 0.5), and the latency of each call —
// what a caller waits for its record to commit — at p50 and p99.
//
//   bench/replicated_journal_bench [--writers 8] [--appends 4000] [--repetitions 3] [--dir D]
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_report.h"
#include "bench/sample_stats.h"
#include "common/status_macros.h"
#include "dispatcher/dispatcher_core.h"
#include "dispatcher/dispatcher_impl.h"
#include "pipeline/spec/builtin_declarations.h"
#include "replication/etcd_journal.h"
#include "testing/etcd_test_cluster.h"

ABSL_FLAG(int, writers, 8, "Threads registering workers concurrently.");
ABSL_FLAG(int64_t, appends, 4000,
          "Journal records per measurement, split over the writers (--quick: 400).");
ABSL_FLAG(int, repetitions, 3, "Measurements per journal.");
ABSL_FLAG(std::string, dir, "/tmp/granary_replicated_journal_bench", "Scratch directory (wiped).");

namespace granary {
namespace {

struct Series {
  std::vector<double> rates;         // appends/s, one per repetition
  std::vector<double> latencies_ms;  // every call's
};

DispatcherOptions Options(const PipelineRegistries& registries) {
  DispatcherOptions options;
  options.snapshot_every = std::numeric_limits<int64_t>::max();  // appends only
  options.worker_timeout_ms = 3600 * 1000;  // no worker is declared lost while measuring
  options.registries = &registries;
  return options;
}

// The journal records per measurement.
int64_t Appends() { return QuickBench() ? 400 : absl::GetFlag(FLAGS_appends); }

// Registers workers through `impl` from the writer threads until Appends() calls are done.
absl::Status Measure(DispatcherImpl& impl, Series* series) {
  const int writers = absl::GetFlag(FLAGS_writers);
  const int64_t appends = Appends();
  const int64_t per_writer = std::max<int64_t>(1, appends / writers);
  std::atomic<bool> go{false};
  absl::Mutex mu;
  absl::Status failure;
  std::vector<std::vector<double>> latencies(writers);
  std::vector<std::thread> threads;
  for (int t = 0; t < writers; ++t) {
    threads.emplace_back([&, t] {
      RegisterWorkerRequest request;
      request.set_worker_id(absl::StrCat("worker-", t));
      request.set_address("127.0.0.1:1");
      while (!go.load()) std::this_thread::yield();
      for (int64_t i = 0; i < per_writer; ++i) {
        RegisterWorkerResponse response;
        const absl::Time start = absl::Now();
        if (absl::Status s = impl.RegisterWorker(request, &response); !s.ok()) {
          absl::MutexLock lock(&mu);
          failure.Update(s);
          return;
        }
        latencies[t].push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      }
    });
  }
  const absl::Time start = absl::Now();
  go.store(true);
  for (std::thread& thread : threads) thread.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  RETURN_IF_ERROR(failure);
  series->rates.push_back(static_cast<double>(per_writer * writers) / seconds);
  for (const std::vector<double>& l : latencies) {
    series->latencies_ms.insert(series->latencies_ms.end(), l.begin(), l.end());
  }
  return absl::OkStatus();
}

// One measurement over a fresh EtcdJournal at `prefix`, led as an elected replica leads it.
absl::Status MeasureEtcd(etcd::EtcdClient& client, const std::string& prefix,
                         const PipelineRegistries& registries, Series* series) {
  EtcdJournalOptions journal_options;
  journal_options.prefix = prefix;
  ASSIGN_OR_RETURN(std::shared_ptr<EtcdJournal> journal,
                   EtcdJournal::Open(&client, journal_options));
  // The fence: an election key of a lease, as LeaderElection writes it.
  ASSIGN_OR_RETURN(const etcdserverpb::LeaseGrantResponse lease, client.LeaseGrant(600));
  const std::string election_key = prefix + "-bench-election";
  ASSIGN_OR_RETURN(const etcdserverpb::PutResponse put,
                   client.Put(election_key, "bench", lease.id()));
  const DispatcherOptions options = Options(registries);
  ASSIGN_OR_RETURN(std::unique_ptr<DispatcherCore> core,
                   DispatcherCore::Open(journal, DispatcherImpl::CoreOptions(options)));
  absl::Mutex mu;
  absl::Status deposed;
  journal->Lead(election_key, put.header().revision(), core->applied_seq() + 1,
                [&](const absl::Status& why) {
                  absl::MutexLock lock(&mu);
                  deposed = why;
                });
  ASSIGN_OR_RETURN(std::unique_ptr<DispatcherImpl> impl,
                   DispatcherImpl::Serve(options, std::move(core)));
  absl::Status measured = Measure(*impl, series);
  impl.reset();
  journal->StopLeading(absl::CancelledError("the measurement is over"));
  RETURN_IF_ERROR(client.LeaseRevoke(lease.id()).status());
  absl::MutexLock lock(&mu);
  return measured.ok() ? deposed : measured;
}

absl::Status MeasureRocksDb(const std::string& journal_dir, const PipelineRegistries& registries,
                            Series* series) {
  DispatcherOptions options = Options(registries);
  options.journal_dir = journal_dir;
  ASSIGN_OR_RETURN(std::unique_ptr<DispatcherImpl> impl, DispatcherImpl::Open(options));
  return Measure(*impl, series);
}

absl::Status Run() {
  const int reps = QuickBench() ? 1 : absl::GetFlag(FLAGS_repetitions);
  const int writers = absl::GetFlag(FLAGS_writers);
  if (writers < 1) return absl::InvalidArgumentError("--writers must be at least 1");
  const std::string dir = absl::GetFlag(FLAGS_dir);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  testing::EtcdTestCluster::Options etcd_options;
  etcd_options.members = 3;
  ASSIGN_OR_RETURN(std::unique_ptr<testing::EtcdTestCluster> etcd,
                   testing::EtcdTestCluster::Start(etcd_options));
  ASSIGN_OR_RETURN(std::unique_ptr<etcd::EtcdClient> client,
                   etcd::EtcdClient::Create(etcd->ClientOptions()));
  const PipelineRegistries registries = BuiltinDeclarations();
  Series over_etcd;
  Series over_rocksdb;
  for (int rep = 0; rep < reps; ++rep) {
    RETURN_IF_ERROR(
        MeasureEtcd(*client, absl::StrCat("/granary-journal-bench-", rep), registries, &over_etcd));
    RETURN_IF_ERROR(MeasureRocksDb(absl::StrCat(dir, "/journal-", rep), registries, &over_rocksdb));
  }
  BenchReport report(
      "replicated_journal",
      absl::StrCat("Dispatcher journal: etcd (3 members, fenced group commit) vs RocksDB, ",
                   writers, " writers"),
      reps);
  report.AddSeries("etcd journal", "appends/s", over_etcd.rates);
  report.AddSeries("RocksDB journal", "appends/s", over_rocksdb.rates);
  report.AddHeadline("etcd / RocksDB appends/s",
                     Median(over_etcd.rates) / Median(over_rocksdb.rates), "x",
                     BenchTarget::AtLeast(0.5));
  report.AddHeadline("commit latency p50, etcd", Quantile(over_etcd.latencies_ms, 0.5), "ms");
  report.AddHeadline("commit latency p99, etcd", Quantile(over_etcd.latencies_ms, 0.99), "ms");
  report.AddHeadline("commit latency p50, RocksDB", Quantile(over_rocksdb.latencies_ms, 0.5), "ms");
  report.AddHeadline("commit latency p99, RocksDB", Quantile(over_rocksdb.latencies_ms, 0.99),
                     "ms");
  report.AddNote(
      absl::StrCat("An append is one RegisterWorker through DispatcherImpl (one journal record); ",
                   absl::GetFlag(FLAGS_appends),
                   " per measurement; latency is per call, over every call of "
                   "every repetition. etcd: heartbeat ",
                   etcd_options.heartbeat_ms, " ms, election ", etcd_options.election_ms,
                   " ms; its members' data and the RocksDB journal are on the same "
                   "file system (under /tmp), fsynced."));
  std::filesystem::remove_all(dir);
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "replicated_journal_bench", granary::Run);
}
