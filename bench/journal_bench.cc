// Journal append throughput: group commit vs one synced write per append.
//
// For 1, 8 and 64 writer threads, appends --appends records of --record_bytes bytes into a
// fresh journal (synced writes, real fsync) in two modes, interleaved per repetition
// (group, single, group, single, ...): "group" (max_batch_records = 1024, the default) and
// "single" (max_batch_records = 1: one synced RocksDB write per append). Prints the median
// appends/s of each, the spread (max - min), appends per batch, and group/single.
//
//   bench/journal_bench [--threads 1,8,64] [--appends 2000] [--repetitions 5] [--dir D]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
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
#include "journal/journal.h"

ABSL_FLAG(std::vector<std::string>, threads, (std::vector<std::string>{"1", "8", "64"}),
          "Writer thread counts to measure.");
ABSL_FLAG(int64_t, appends, 2000, "Appends per measurement (split evenly over the threads).");
ABSL_FLAG(int64_t, record_bytes, 128, "Bytes per record.");
ABSL_FLAG(int, repetitions, 5, "Measurements per configuration.");
ABSL_FLAG(std::string, dir, "/tmp/granary_journal_bench", "Scratch directory (wiped).");

namespace granary {
namespace {

struct Series {
  std::vector<double> rates;
  double appends = 0;
  double batches = 0;
};

// One measurement into a fresh journal.
absl::Status Measure(int threads, int64_t max_batch_records, Series* series) {
  const std::string dir = absl::GetFlag(FLAGS_dir);
  std::filesystem::remove_all(dir);
  JournalOptions options;
  options.max_batch_records = max_batch_records;
  absl::StatusOr<std::unique_ptr<Journal>> journal = Journal::Open(dir, options);
  if (!journal.ok()) return journal.status();
  const int64_t per_thread = std::max<int64_t>(1, absl::GetFlag(FLAGS_appends) / threads);
  const std::string record(absl::GetFlag(FLAGS_record_bytes), 'r');
  std::atomic<bool> go{false};
  absl::Mutex mu;
  absl::Status failure;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int64_t i = 0; i < per_thread; ++i) {
        absl::StatusOr<uint64_t> seq = (*journal)->Append(record);
        if (!seq.ok()) {
          absl::MutexLock lock(&mu);
          failure.Update(seq.status());
          return;
        }
      }
    });
  }
  const absl::Time start = absl::Now();
  go.store(true);
  for (std::thread& worker : workers) worker.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!failure.ok()) return failure;
  const double appends = static_cast<double>(per_thread * threads);
  series->rates.push_back(appends / seconds);
  series->appends += appends;
  series->batches += static_cast<double>((*journal)->batches_written());
  return absl::OkStatus();
}

absl::Status Run() {
  const int reps = QuickBench() ? 1 : absl::GetFlag(FLAGS_repetitions);
  const int64_t record_bytes = absl::GetFlag(FLAGS_record_bytes);
  BenchReport report("journal",
                     absl::StrCat("Journal: group commit vs one sync per append (", record_bytes,
                                  "-byte records, real fsync)"),
                     reps);
  for (const std::string& threads_text : absl::GetFlag(FLAGS_threads)) {
    const int threads = std::stoi(threads_text);
    Series group;
    Series single;
    for (int rep = 0; rep < reps; ++rep) {
      RETURN_IF_ERROR(Measure(threads, 1024, &group));
      RETURN_IF_ERROR(Measure(threads, 1, &single));
    }
    report.AddSeries(absl::StrCat("one sync per append, ", threads, " writers"), "appends/s",
                     single.rates, BenchPoint{"one sync per append", double(threads)});
    report.AddSeries(absl::StrCat("group commit, ", threads, " writers"), "appends/s", group.rates,
                     BenchPoint{"group commit", double(threads)});
    report.AddHeadline(absl::StrCat("appends per batch, group commit, ", threads, " writers"),
                       group.appends / group.batches, "appends");
    report.AddHeadline(absl::StrCat("group commit / one sync per append, ", threads, " writers"),
                       Median(group.rates) / Median(single.rates), "x",
                       threads == 64 ? BenchTarget::AtLeast(20) : BenchTarget());
  }
  std::filesystem::remove_all(absl::GetFlag(FLAGS_dir));
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::BenchMain(argc, argv, "journal_bench", granary::Run);
}
