// Equal shares against dynamic sharding, 2 consumers (issue 34).
//
// Starts a real dispatcher and 2 workers (processes on 127.0.0.1) and reads the ResNet-style
// example pipeline (batch 128) over a generated dataset of 8 files as a job of 2 consumers — two
// reader threads of this process, one per consumer, reading concurrently — with equal shares
// (remainder pad, the default) and with dynamic sharding, in rotating order over --repetitions
// rounds after a warm-up round; each epoch is a fresh job, 2 tasks per consumer, seeded by its
// round. Both with the example's split per file and with finer splits (the source's
// records_per_split). An epoch's images/s counts the images the two consumers delivered
// (padding not counted) over the wall time from the first ReadEpoch to both readers' end. The
// benchmark fails unless each epoch's union over the consumers is the in-process epoch of the
// same seed exactly once (EpochDigest: rows and multiset) and, under equal shares, both
// consumers delivered as many batches (padding counted). Each epoch's profile: the padding,
// how long after the first consumer the last one ended, how long a consumer waited for its end
// after its last element, the cores the workers and this process kept busy, and how the
// workers' CPU time split between the two workers.
//
//   bench/sharding_bench [--images N] [--size S] [--repetitions R] [--dir D]
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/bench_report.h"
#include "bench/bench_service.h"
#include "bench/bench_setup.h"
#include "bench/process_stats.h"
#include "bench/resnet_bench_flags.h"
#include "bench/sample_stats.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "granary/client.h"
#include "pipeline/digests/epoch_digest.h"
#include "pipeline/local_runner.h"

namespace granary {
namespace {

constexpr int kConsumers = 2;

// What an epoch's exactly-once check compares: its rows and multiset digest (EpochDigest).
struct RowsDigest {
  int64_t rows = 0;
  uint64_t multiset = 0;

  // Adds `digest`'s rows (the multiset digest is a wrapping sum).
  void Add(const EpochDigest& digest) {
    rows += digest.rows();
    multiset += digest.multiset();
  }
  bool operator==(const RowsDigest& other) const {
    return rows == other.rows && multiset == other.multiset;
  }
};

// CpuSecondsOf each of `pids`.
std::vector<double> CpuSecondsOfEach(const std::vector<pid_t>& pids) {
  std::vector<double> seconds;
  for (pid_t pid : pids) seconds.push_back(CpuSecondsOf(pid));
  return seconds;
}

// One epoch read by every consumer at once.
struct ShardedEpoch {
  std::vector<ServiceEpoch> consumers;
  // The union of the consumers' elements, padding not counted.
  RowsDigest digest;
  // From the first ReadEpoch to the last reader's end.
  double seconds = 0;
};

// Reads epoch 0 of `job` as each of its kConsumers consumers, each on a thread of its own.
absl::StatusOr<ShardedEpoch> ReadAllConsumers(Job& job) {
  std::vector<std::unique_ptr<EpochDigest>> digests;
  for (int32_t c = 0; c < kConsumers; ++c) {
    digests.push_back(std::make_unique<EpochDigest>(/*batched=*/true));
  }
  std::vector<absl::StatusOr<ServiceEpoch>> reads(kConsumers);
  const absl::Time start = absl::Now();
  std::vector<std::thread> readers;
  for (int32_t c = 0; c < kConsumers; ++c) {
    readers.emplace_back([&, c] { reads[c] = ReadServiceEpoch(job, 0, c, digests[c].get()); });
  }
  for (std::thread& reader : readers) reader.join();
  ShardedEpoch epoch;
  epoch.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (int32_t c = 0; c < kConsumers; ++c) {
    if (!reads[c].ok()) return Annotate(reads[c].status(), absl::StrCat("consumer ", c));
    epoch.consumers.push_back(*reads[c]);
    epoch.digest.Add(*digests[c]);
  }
  return epoch;
}

// The in-process epoch 0 of `pipeline` with `seed`: what the consumers' union must be.
absl::StatusOr<RowsDigest> DigestInProcess(const Pipeline& pipeline, uint64_t seed, Env* env) {
  EpochDigest digest(/*batched=*/true);
  EpochRunOptions options;
  options.digest = false;  // The digest below is the one compared.
  options.on_element = [&digest](const Element& e) { digest.Add(e); };
  RETURN_IF_ERROR(RunEpochInProcess(pipeline, seed, 0, env, options).status());
  RowsDigest reference;
  reference.Add(digest);
  return reference;
}

// How the pipeline's input is cut into splits, and what runs it.
struct SplitLayout {
  std::string name;
  std::string dataset;              // Its registered id.
  std::unique_ptr<Pipeline> local;  // The in-process reference.
};

struct Mode {
  std::string name;
  std::string job_prefix;
  JobSharding sharding;
  size_t layout;  // Index into the layouts.
  std::vector<double> rates;
  // Per measured epoch: padding images, and the seconds between the first and the last
  // consumer's end (how long one consumer's tasks had nothing of it left to do).
  std::vector<double> padding_images;
  std::vector<double> tail_seconds;
  // Per measured epoch: the longest a consumer waited for its end after its last element that
  // was not padding (its remainder rule deciding, the end of its tasks learnt).
  std::vector<double> end_wait_seconds;
  // Per measured epoch, a profile: the cores the service kept busy (the workers' and this
  // process's CPU seconds over the wall time), and the busier worker's share of the workers' CPU
  // (0.5: even; 1: one worker did it all).
  std::vector<double> cores_busy;
  std::vector<double> busier_worker_share;
  // Per measured epoch: BatchCounts.
  std::vector<std::string> batches;
};

// Each consumer's batches, "delivered+padding", joined by " / ".
std::string BatchCounts(const ShardedEpoch& epoch) {
  return absl::StrJoin(epoch.consumers, " / ", [](std::string* out, const ServiceEpoch& c) {
    absl::StrAppend(out, c.elements, "+", c.padding_elements);
  });
}

// DataLoss unless `epoch`'s union is `in_process` (every row exactly once); Internal if, under
// equal shares, its consumers delivered different numbers of batches. Errors name the mode and
// the seed.
absl::Status CheckEpoch(const Mode& mode, uint64_t seed, const ShardedEpoch& epoch,
                        const RowsDigest& in_process) {
  const std::string what = absl::StrCat(mode.name, ", seed ", seed);
  if (!(epoch.digest == in_process)) {
    return absl::DataLossError(absl::StrCat(
        what, ": the consumers' union is not the in-process epoch exactly once: ",
        epoch.digest.rows, " rows, multiset ", absl::Hex(epoch.digest.multiset), "; in-process ",
        in_process.rows, " rows, multiset ", absl::Hex(in_process.multiset)));
  }
  if (mode.sharding != JobSharding::kEqual) return absl::OkStatus();
  const ServiceEpoch& first = epoch.consumers[0];
  for (const ServiceEpoch& consumer : epoch.consumers) {
    if (consumer.elements + consumer.padding_elements != first.elements + first.padding_elements) {
      return absl::InternalError(
          absl::StrCat(what, ": the consumers delivered different numbers of batches (",
                       BatchCounts(epoch), ", delivered+padding)"));
    }
  }
  return absl::OkStatus();
}

// Records per split of the finer layout: a quarter of a file of the default dataset.
constexpr int kRecordsPerSplit = 128;

absl::Status Run() {
  Env* env = Env::Default();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t size = absl::GetFlag(FLAGS_size);
  ASSIGN_OR_RETURN(PipelineDef by_file, ResnetPipelineFromFlags(env));
  SetOpParam(&by_file, "batch", "batch_size", 128);
  PipelineDef by_records = by_file;
  (*by_records.mutable_source()->mutable_params()->mutable_fields())["records_per_split"]
      .set_number_value(kRecordsPerSplit);
  ASSIGN_OR_RETURN(BenchService service,
                   StartBenchService(dir + "/cluster", by_file, {.cluster = {.workers = 2}}));
  std::vector<SplitLayout> layouts(2);
  layouts[0].name = "a split per file";
  layouts[0].dataset = service.dataset;
  layouts[1].name = absl::StrCat("splits of ", kRecordsPerSplit, " records");
  ASSIGN_OR_RETURN(layouts[1].dataset, service.client->RegisterPipeline(by_records));
  const PipelineDef* defs[] = {&by_file, &by_records};
  std::vector<Mode> modes;
  for (size_t l = 0; l < layouts.size(); ++l) {
    ASSIGN_OR_RETURN(layouts[l].local,
                     Pipeline::Create(*defs[l], PipelineRegistries::WithBuiltins()));
    modes.push_back({absl::StrCat(layouts[l].name, ", equal shares (pad)"),
                     absl::StrCat("equal-", l), JobSharding::kEqual, l});
    modes.push_back({absl::StrCat(layouts[l].name, ", dynamic"), absl::StrCat("dynamic-", l),
                     JobSharding::kDynamic, l});
  }
  // Whose CPU time the profile reads: the 2 workers', then this process's.
  const std::vector<pid_t> pids = {service.cluster->worker_pid(0), service.cluster->worker_pid(1),
                                   0};
  const int reps = absl::GetFlag(FLAGS_repetitions);
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up.
    const uint64_t seed = rep + 2;
    std::vector<RowsDigest> in_process;
    for (const SplitLayout& layout : layouts) {
      ASSIGN_OR_RETURN(in_process.emplace_back(), DigestInProcess(*layout.local, seed, env));
    }
    for (size_t k = 0; k < modes.size(); ++k) {
      Mode& mode = modes[(k + std::max(rep, 0)) % modes.size()];
      ASSIGN_OR_RETURN(std::unique_ptr<Job> job,
                       service.client->OpenJob(layouts[mode.layout].dataset,
                                               {.name = absl::StrCat(mode.job_prefix, "-", rep + 1),
                                                .seed = seed,
                                                .num_consumers = kConsumers,
                                                .num_worker_slots = 2,
                                                .sharding = mode.sharding}));
      const std::vector<double> cpu_before = CpuSecondsOfEach(pids);
      ASSIGN_OR_RETURN(const ShardedEpoch epoch, ReadAllConsumers(*job));
      std::vector<double> cpu = CpuSecondsOfEach(pids);
      for (size_t i = 0; i < cpu.size(); ++i) cpu[i] -= cpu_before[i];
      RETURN_IF_ERROR(CheckEpoch(mode, seed, epoch, in_process[mode.layout]));
      if (rep < 0) continue;
      mode.rates.push_back(epoch.digest.rows / epoch.seconds);
      double padding = 0, first_end = epoch.seconds, last_end = 0, end_wait = 0;
      for (const ServiceEpoch& c : epoch.consumers) {
        padding += c.padding_rows;
        first_end = std::min(first_end, c.seconds);
        last_end = std::max(last_end, c.seconds);
        end_wait = std::max(end_wait, c.seconds - c.seconds_to_last_element);
      }
      mode.padding_images.push_back(padding);
      mode.tail_seconds.push_back(last_end - first_end);
      mode.end_wait_seconds.push_back(end_wait);
      mode.cores_busy.push_back((cpu[0] + cpu[1] + cpu[2]) / epoch.seconds);
      mode.busier_worker_share.push_back(std::max(cpu[0], cpu[1]) / (cpu[0] + cpu[1]));
      mode.batches.push_back(BatchCounts(epoch));
    }
  }
  BenchReport report(
      "sharding",
      absl::StrCat("Equal shares vs dynamic sharding, 2 consumers (ResNet-style pipeline, ", size,
                   "x", size, " JPEGs cropped to 224x224, batch 128, 2 workers, 2 cores shared)"),
      reps);
  for (const Mode& mode : modes) report.AddSeries(mode.name, "images/s", mode.rates);
  for (size_t l = 0; l < layouts.size(); ++l) {
    const Mode& equal = modes[2 * l];
    const Mode& dynamic = modes[2 * l + 1];
    report.AddHeadline(absl::StrCat("equal shares / dynamic (2 consumers, ", layouts[l].name, ")"),
                       Median(equal.rates) / Median(dynamic.rates), "x", BenchTarget::AtLeast(0.9));
    std::vector<double> round_ratios;
    for (int rep = 0; rep < reps; ++rep) {
      round_ratios.push_back(equal.rates[rep] / dynamic.rates[rep]);
    }
    report.AddSeries(absl::StrCat(layouts[l].name, ": equal shares / dynamic, per round"), "x",
                     round_ratios);
  }
  for (const Mode& mode : modes) {
    report.AddSeries(absl::StrCat(mode.name, ": padding images per epoch"), "images",
                     mode.padding_images);
    report.AddSeries(absl::StrCat(mode.name, ": last consumer's end after the first's"), "s",
                     mode.tail_seconds);
    report.AddSeries(absl::StrCat(mode.name, ": longest wait for the end after the last element"),
                     "s", mode.end_wait_seconds);
    report.AddSeries(absl::StrCat(mode.name, ": cores busy (workers and trainer)"), "cores",
                     mode.cores_busy);
    report.AddSeries(absl::StrCat(mode.name, ": busier worker's share of worker CPU"), "share",
                     mode.busier_worker_share);
    report.AddNote(absl::StrCat(mode.name, ": batches per round, consumer 0 / consumer 1 ",
                                "(delivered+padding): ", absl::StrJoin(mode.batches, "; ")));
  }
  report.AddNote(
      "Each epoch is a fresh job of 2 consumers (2 tasks each, 4 on the 2 workers; a task leases "
      "4 splits per call), read by two threads of the benchmark through shared memory; its union "
      "over the consumers was checked against the in-process epoch of the same seed (rows and "
      "multiset digest). The dataset has 8 files: \"a split per file\" is the example pipeline, "
      "the finer layout sets the source's records_per_split.");
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(
      argc, argv, "sharding_bench",
      {.images = 4100, .size = 256, .dir = "/tmp/granary_sharding_bench", .quick_images = 256},
      granary::Run);
}
