// How long a dispatcher takes to come back, as its journal grows: for each --updates count, a
// journal of that many updates is written through a DispatcherImpl (worker registrations from 64
// threads, group-committed with real fsyncs), once with snapshots every 10 000 records (the
// default) and once without; then `granary dispatcher` is started on each journal, in rotating
// order, and timed from process start to its "listening on" line (recovery: load the newest
// snapshot, replay the records after it).
//
//   bench/dispatcher_restart_bench [--updates 100000,1000000] [--repetitions 3] [--dir D]
#include <signal.h>

#include <chrono>
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
#include "bench/bench_report.h"
#include "bench/sample_stats.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "dispatcher/dispatcher_impl.h"
#include "pipeline/spec/builtin_declarations.h"

ABSL_FLAG(std::vector<std::string>, updates, (std::vector<std::string>{"100000", "1000000"}),
          "Journal lengths (updates) to restart from.");
ABSL_FLAG(int, repetitions, 3, "Restarts timed per journal.");
ABSL_FLAG(std::string, dir, "/tmp/granary_dispatcher_restart_bench", "Scratch directory (wiped).");

namespace granary {
namespace {

constexpr int64_t kWithSnapshots = 10000;
constexpr int64_t kWithoutSnapshots = std::numeric_limits<int64_t>::max();
constexpr int kWriters = 64;

// Writes `updates` journal records into a new journal at `journal_dir`.
absl::Status FillJournal(const std::string& journal_dir, int64_t updates, int64_t snapshot_every) {
  const PipelineRegistries registries = BuiltinDeclarations();
  DispatcherOptions options;
  options.journal_dir = journal_dir;
  options.snapshot_every = snapshot_every;
  options.worker_timeout_ms = 3600 * 1000;  // No worker is declared lost while filling.
  options.registries = &registries;
  ASSIGN_OR_RETURN(std::unique_ptr<DispatcherImpl> impl, DispatcherImpl::Open(options));
  absl::Mutex mu;
  absl::Status failure;
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      RegisterWorkerRequest request;
      request.set_worker_id(absl::StrCat("worker-", t));
      request.set_address("127.0.0.1:1");
      for (int64_t i = t; i < updates; i += kWriters) {
        RegisterWorkerResponse response;
        if (absl::Status s = impl->RegisterWorker(request, &response); !s.ok()) {
          absl::MutexLock lock(&mu);
          failure.Update(s);
          return;
        }
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  return failure;
}

// Seconds from starting `granary dispatcher` on `journal_dir` to its "listening on" line.
absl::StatusOr<double> TimeRestart(const std::string& journal_dir, int64_t snapshot_every,
                                   const std::string& log) {
  const absl::Time start = absl::Now();
  Subprocess dispatcher({GRANARY_BINARY, "dispatcher", "--insecure", "--journal_dir=" + journal_dir, "--port=0",
                         absl::StrCat("--snapshot_every=", snapshot_every)},
                        Subprocess::Stderr::kToFile, log);
  const std::string address = dispatcher.ReadListenAddress(std::chrono::minutes(10));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  dispatcher.Kill(SIGTERM);
  dispatcher.Wait();
  if (address.empty()) {
    return absl::UnavailableError(
        absl::StrCat("the dispatcher on ", journal_dir, " did not start (see ", log, ")"));
  }
  return seconds;
}

absl::Status Run() {
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const bool quick = QuickBench();
  const int reps = quick ? 1 : absl::GetFlag(FLAGS_repetitions);
  const std::vector<std::string> counts =
      quick ? std::vector<std::string>{"1000", "10000"} : absl::GetFlag(FLAGS_updates);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  struct Journal {
    std::string name, path;
    int64_t updates, snapshot_every;
    std::vector<double> restarts;
  };
  std::vector<Journal> journals;
  for (const std::string& count : counts) {
    const int64_t updates = std::stoll(count);
    for (const int64_t snapshot_every : {kWithSnapshots, kWithoutSnapshots}) {
      const bool with = snapshot_every == kWithSnapshots;
      Journal& j = journals.emplace_back();
      j.name = with ? "with snapshots" : "without snapshots";
      j.path = absl::StrCat(dir, "/journal-", updates, with ? "-snapshots" : "-plain");
      j.updates = updates;
      j.snapshot_every = snapshot_every;
      RETURN_IF_ERROR(FillJournal(j.path, updates, snapshot_every));
    }
  }
  for (int rep = 0; rep < reps; ++rep) {
    for (size_t k = 0; k < journals.size(); ++k) {
      Journal& j = journals[(k + rep) % journals.size()];
      ASSIGN_OR_RETURN(double seconds,
                       TimeRestart(j.path, j.snapshot_every, dir + "/dispatcher.log"));
      j.restarts.push_back(seconds);
    }
  }
  BenchReport report("dispatcher_restart",
                     "Dispatcher restart: process start -> serving, by journal length", reps);
  for (const Journal& j : journals) {
    report.AddSeries(absl::StrCat(j.updates, " updates, ", j.name), "s", j.restarts,
                     BenchPoint{j.name, static_cast<double>(j.updates)});
  }
  const Journal& longest_with = journals[journals.size() - 2];
  report.AddHeadline(absl::StrCat("restart at ", longest_with.updates, " updates with snapshots"),
                     Median(longest_with.restarts), "s",
                     longest_with.updates >= 1000000 ? BenchTarget::AtMost(1) : BenchTarget());
  report.AddNote(
      "Updates are worker registrations (one journal record each), written by 64 threads "
      "through group commit.");
  std::filesystem::remove_all(dir);
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "dispatcher_restart_bench", granary::Run);
}
