// Raw transport, 1 worker -> 1 client (issue 14): a trivial pipeline (range -> parallel_map
// fill_bytes -> batch of 1) of 16 MiB elements, 1 GiB per epoch, read through the client library
// over TCP loopback, over shared memory (the worker on the client's host), over TCP with LZ4
// and Zstandard compression, and with mutual TLS (issue 15: over TCP, and shared memory in a TLS
// cluster, where every GetElements carries its capability), against a one-core memcpy of the same sizes measured in the same
// run. Rotating order, a warm-up round first. Also
// the client's CPU per GiB (from /proc), which is what a trainer pays for its data.
//
//   bench/transport_bench [--mib 16] [--gib 1] [--repetitions R] [--dir D]
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bench_report.h"
#include "bench/bench_service.h"
#include "bench/bench_setup.h"
#include "bench/process_stats.h"
#include "bench/resnet_bench_flags.h"
#include "bench/sample_stats.h"
#include "common/status_macros.h"
#include "transport/buffer_pool.h"

ABSL_FLAG(int64_t, mib, 16, "Element size in MiB.");
ABSL_FLAG(int64_t, gib, 1, "GiB per epoch.");

namespace granary {
namespace {

struct Transport {
  std::string name;
  std::string worker_flag;
  bool shared_memory;
  JobCompression compression = JobCompression::kNone;
  bool tls = false;
};

absl::Status Run() {
  const bool quick = QuickBench();
  const int reps = quick ? 1 : absl::GetFlag(FLAGS_repetitions);
  const int64_t mib = absl::GetFlag(FLAGS_mib);
  const int64_t elements =
      std::max<int64_t>(2, (quick ? 64 : absl::GetFlag(FLAGS_gib) << 10) / mib);
  const size_t bytes = static_cast<size_t>(mib) << 20;
  const PipelineDef def = PipelineBuilder::Range(elements)
                              .ParallelMap("fill_bytes", 1, {{"bytes", static_cast<int64_t>(bytes)}})
                              .Batch(1)
                              .Build();
  const std::vector<Transport> transports = {
      {"tcp", "--local_transport=tcp", false},
      {"shared memory", "--local_transport=shm", true},
      {"tcp, lz4", "--local_transport=tcp", false, JobCompression::kLz4},
      {"tcp, zstd", "--local_transport=tcp", false, JobCompression::kZstd},
      {"tcp, TLS", "--local_transport=tcp", false, JobCompression::kNone, true},
      {"shared memory, TLS cluster", "--local_transport=shm", true, JobCompression::kNone, true}};
  std::vector<BenchService> services;
  std::vector<std::unique_ptr<Job>> jobs;
  for (const Transport& t : transports) {
    BenchServiceOptions options;
    options.cluster.worker_flags = {t.worker_flag};
    options.client.shared_memory = t.shared_memory;
    options.tls = t.tls;
    ASSIGN_OR_RETURN(BenchService service,
                     StartBenchService(absl::StrCat(absl::GetFlag(FLAGS_dir), "/", services.size()),
                                       def, options));
    ASSIGN_OR_RETURN(std::unique_ptr<Job> job,
                     service.client->OpenJob(service.dataset,
                                             {.name = "transport", .compression = t.compression}));
    services.push_back(std::move(service));
    jobs.push_back(std::move(job));
  }
  // memcpy between two pooled buffers, as the transports' buffers are.
  ASSIGN_OR_RETURN(BufferRef src, BufferPool::Default()->Allocate(bytes));
  ASSIGN_OR_RETURN(BufferRef dst, BufferPool::Default()->Allocate(bytes));
  std::memset(src->data(), 1, bytes);
  std::memset(dst->data(), 2, bytes);

  std::vector<std::vector<double>> rates(transports.size()), cpu_per_gib(transports.size());
  std::vector<double> memcpy_rates;
  int64_t epoch = 0;
  for (int rep = -1; rep < reps; ++rep) {
    for (size_t k = 0; k < transports.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(std::max(rep, 0))) % transports.size();
      const double cpu_before = CpuSecondsOf();
      ASSIGN_OR_RETURN(ServiceEpoch read, ReadServiceEpoch(*jobs[i], epoch));
      const double cpu = CpuSecondsOf() - cpu_before;
      if (rep < 0) continue;
      rates[i].push_back(read.bytes / read.seconds / 1e9);
      cpu_per_gib[i].push_back(cpu / (read.bytes / double(1 << 30)));
    }
    ++epoch;
    const absl::Time start = absl::Now();
    for (int64_t e = 0; e < elements; ++e) {
      src->data()[e % bytes] = static_cast<char>(e);
      std::memcpy(dst->data(), src->data(), bytes);
    }
    if (rep >= 0) {
      memcpy_rates.push_back(elements * bytes / absl::ToDoubleSeconds(absl::Now() - start) / 1e9);
    }
  }
  BenchReport report("transport",
                     absl::StrCat("Transport, 1 worker -> 1 client, ", mib,
                                  " MiB elements: TCP loopback and shared memory vs memcpy"),
                     reps);
  for (size_t i = 0; i < transports.size(); ++i) {
    report.AddSeries(transports[i].name, "GB/s", rates[i]);
    report.AddSeries(absl::StrCat(transports[i].name, ": client CPU"), "s/GiB", cpu_per_gib[i]);
  }
  report.AddSeries("memcpy, one core", "GB/s", memcpy_rates);
  report.AddHeadline("TCP loopback", Median(rates[0]), "GB/s", BenchTarget::AtLeast(3.0));
  report.AddHeadline("shared memory", Median(rates[1]), "GB/s", BenchTarget::AtLeast(8.0));
  report.AddHeadline("shared memory / one-core memcpy", Median(rates[1]) / Median(memcpy_rates),
                     "x", BenchTarget::AtLeast(0.5));
  report.AddHeadline("TCP with TLS", Median(rates[4]), "GB/s");
  report.AddHeadline("TCP with TLS / plain text", Median(rates[4]) / Median(rates[0]), "x",
                     BenchTarget::AtLeast(0.8));
  report.AddHeadline("shared memory in a TLS cluster / plain text",
                     Median(rates[5]) / Median(rates[1]), "x", BenchTarget::AtLeast(0.8));
  report.AddNote("A shared-memory element is mapped, not copied, and not hashed (no bytes "
                 "travel); a TCP element crosses the kernel twice, is copied once into the "
                 "client's buffer and hashed (XXH3) on both sides. fill_bytes elements are one "
                 "repeated byte: compression sees the best case, not a float32 batch's. With TLS every "
                 "byte over TCP is also encrypted and decrypted (AES-GCM, gRPC's TLS); in a TLS "
                 "cluster shared memory needs no encryption (nothing travels), but every "
                 "GetElements carries and is checked against its task's capability.");
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(argc, argv, "transport_bench",
                                  {.images = 0, .dir = "/tmp/granary_transport_bench"},
                                  granary::Run);
}
