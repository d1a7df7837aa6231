// The remote data plane (issue 36): a trainer reading over a real network stack with a bandwidth
// ceiling from workers on "another host", against the PyTorch DataLoader and the in-process
// pipeline on the same machine, in the same run.
//
// The dispatcher and 2 workers run in a network namespace of their own (faultinject/netns.h),
// joined to this process — the trainer, reading through the client library — by veths and a
// bridge, with a token bucket (tc tbf) on the workers' link at each --rates_gbit in turn. Every
// byte between trainer and workers crosses that link; none goes through shared memory (which a
// namespace does not share). TLS is on by default (--tls), as `granary cluster` deploys. Without
// root the cluster runs on this namespace's loopback instead, and the report says so.
//
// Rotating order per round after a warm-up round: the DataLoader with num_workers=2
// (bench/pytorch_peer.py), Granary in-process (granary local's runner), and Granary remote at
// each rate — as deployed (the pipeline's normalize run by the trainer's client: JobSpec.tail
// auto over TCP) and with normalize kept on the workers (tail worker). For every configuration:
// images/s and cores busy; for the remote ones also the bytes that crossed the link per image (both
// directions, headers included: the harness veth's counters; on loopback, all of lo's), the
// trainer's CPU per image (this process) and the servers' (dispatcher and workers). The in-process
// pipeline's CPU per image is the yardstick for the trainer's.
//
//   bench/remote_bench [--images N] [--size S] [--repetitions R] [--dir D] [--rates_gbit 10,25]
//                      [--notls] [--batch_size B]
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "bench/bench_report.h"
#include "bench/bench_service.h"
#include "bench/bench_setup.h"
#include "bench/process_stats.h"
#include "bench/pytorch_peer_runner.h"
#include "bench/resnet_bench_flags.h"
#include "bench/sample_stats.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "faultinject/netns.h"
#include "granary/client.h"
#include "pipeline/local_runner.h"

ABSL_FLAG(std::vector<std::string>, rates_gbit, (std::vector<std::string>{"10", "25"}),
          "The link's rate limits, in Gbit/s, each measured in every round.");
ABSL_FLAG(bool, tls, true, "Mutual TLS between trainer and cluster (the deployed default).");
ABSL_FLAG(int64_t, batch_size, 128, "Images per batch, on every side.");

namespace granary {
namespace {

// The namespace the cluster runs in.
constexpr char kCluster[] = "cluster";

struct Epoch {
  double images_per_s = 0;
  double cores_busy = 0;
  // Remote epochs only (0 otherwise).
  double wire_bytes_per_image = 0;
  double payload_bytes_per_image = 0;
  double trainer_cpu_ms_per_image = 0;
  double server_cpu_ms_per_image = 0;
  // In-process epochs: the pipeline's CPU per image.
  double pipeline_cpu_ms_per_image = 0;
};

// Bytes both ways through network interface `link` so far.
absl::StatusOr<int64_t> LinkBytes(const std::string& link) {
  int64_t total = 0;
  for (const char* counter : {"rx_bytes", "tx_bytes"}) {
    const std::string path = absl::StrCat("/sys/class/net/", link, "/statistics/", counter);
    std::ifstream in(path);
    int64_t bytes = -1;
    if (!(in >> bytes) || bytes < 0) {
      return absl::UnavailableError(absl::StrCat("cannot read ", path));
    }
    total += bytes;
  }
  return total;
}

// One byte per value of the first tensor of a row of `pipeline`'s output (its image, as uint8).
absl::StatusOr<int64_t> Uint8ImageBytes(const Pipeline& pipeline, Env* env) {
  ASSIGN_OR_RETURN(std::unique_ptr<Iterator> it,
                   MakeEpochIterator(pipeline, 1, 0, env, std::nullopt));
  Element element;
  bool end = false;
  RETURN_IF_ERROR(it->GetNext(&element, &end));
  if (end || element.tensors.empty() || element.tensors[0].shape().empty()) {
    return absl::InternalError("the pipeline yields no batched image");
  }
  return element.tensors[0].num_elements() / element.tensors[0].shape()[0];
}

absl::Status Run() {
  Env* env = Env::Default();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t images = absl::GetFlag(FLAGS_images);
  const int64_t size = absl::GetFlag(FLAGS_size);
  const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
  const bool tls = absl::GetFlag(FLAGS_tls);
  std::vector<int64_t> rates_gbit;
  for (const std::string& rate : absl::GetFlag(FLAGS_rates_gbit)) {
    int64_t gbit = 0;
    if (!absl::SimpleAtoi(rate, &gbit) || gbit <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--rates_gbit: '", rate, "' is not a rate"));
    }
    rates_gbit.push_back(gbit);
  }
  ASSIGN_OR_RETURN(PipelineDef def, ResnetPipelineFromFlags(env));
  SetOpParam(&def, "batch", "batch_size", batch_size);
  const std::string data_dir = absl::StrCat(dir, "/imagenet_", size, "_", images);
  const PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> local, Pipeline::Create(def, registries));
  ASSIGN_OR_RETURN(const int64_t uint8_image_bytes, Uint8ImageBytes(*local, env));

  // The link: a namespace for the cluster, or (without root) none.
  std::unique_ptr<NetworkNamespaces> network;
  std::string link = "lo";
  BenchServiceOptions options;
  options.cluster.workers = 2;
  options.tls = tls;
  options.client.shared_memory = false;
  if (::geteuid() == 0) {
    ASSIGN_OR_RETURN(network, NetworkNamespaces::Create({kCluster}));
    options.cluster.network_namespace = network->path(kCluster);
    options.cluster.host = network->address(kCluster);
    link = network->harness_link();
  } else {
    std::fprintf(stderr, "remote_bench: not root, so no network namespace: over loopback\n");
  }
  ASSIGN_OR_RETURN(BenchService service, StartBenchService(dir + "/cluster", def, options));
  const testing::LocalCluster& cluster = *service.cluster;
  // The job as deployed (its normalize run here: the tail's default over TCP), and the same with
  // normalize kept on the workers (the data plane before the trainer-side tail).
  ASSIGN_OR_RETURN(std::unique_ptr<Job> job,
                   service.client->OpenJob(service.dataset,
                                           {.name = "remote", .seed = 1, .num_worker_slots = 2}));
  JobSpec worker_tail_spec{.name = "remote-worker-tail", .seed = 1, .num_worker_slots = 2};
  worker_tail_spec.tail = JobTail::kWorker;
  ASSIGN_OR_RETURN(std::unique_ptr<Job> worker_tail_job,
                   service.client->OpenJob(service.dataset, worker_tail_spec));
  const std::vector<pid_t> servers = {cluster.dispatcher_pid(), cluster.worker_pid(0),
                                      cluster.worker_pid(1)};

  const auto remote_epoch = [&](Job& job, int64_t gbit, int64_t epoch) -> absl::StatusOr<Epoch> {
    if (network != nullptr) RETURN_IF_ERROR(network->Limit(kCluster, gbit * 1'000'000));
    ASSIGN_OR_RETURN(const int64_t bytes_before, LinkBytes(link));
    const double server_cpu_before = CpuSecondsOfAll(servers);
    const double trainer_cpu_before = CpuSecondsOf();
    ASSIGN_OR_RETURN(const ServiceEpoch read, ReadServiceEpoch(job, epoch));
    const double trainer_cpu = CpuSecondsOf() - trainer_cpu_before;
    const double server_cpu = CpuSecondsOfAll(servers) - server_cpu_before;
    ASSIGN_OR_RETURN(const int64_t bytes_after, LinkBytes(link));
    Epoch e;
    e.images_per_s = read.rows / read.seconds;
    e.cores_busy = (trainer_cpu + server_cpu) / read.seconds;
    e.wire_bytes_per_image = double(bytes_after - bytes_before) / read.rows;
    e.payload_bytes_per_image = double(read.bytes) / read.rows;
    e.trainer_cpu_ms_per_image = trainer_cpu * 1e3 / read.rows;
    e.server_cpu_ms_per_image = server_cpu * 1e3 / read.rows;
    return e;
  };
  const auto local_epoch = [&](int64_t epoch) -> absl::StatusOr<Epoch> {
    EpochRunOptions run_options;
    run_options.digest = false;
    const double cpu_before = CpuSecondsOf();
    ASSIGN_OR_RETURN(EpochResult run, RunEpochInProcess(*local, 1, epoch, env, run_options));
    const double cpu = CpuSecondsOf() - cpu_before;
    Epoch e;
    e.images_per_s = images / run.seconds;
    e.cores_busy = cpu / run.seconds;
    e.pipeline_cpu_ms_per_image = cpu * 1e3 / images;
    return e;
  };
  const auto peer_epoch = [&](int64_t epoch) -> absl::StatusOr<Epoch> {
    ASSIGN_OR_RETURN(const DataLoaderEpoch peer,
                     RunDataLoaderEpoch(data_dir, 2, batch_size, epoch));
    Epoch e;
    e.images_per_s = peer.images_per_s;
    e.cores_busy = peer.cores_busy;
    return e;
  };

  struct Config {
    std::string name;
    std::function<absl::StatusOr<Epoch>(int64_t epoch)> run;
    std::vector<Epoch> epochs;
    std::vector<double> Of(double Epoch::*field) const {
      std::vector<double> values;
      for (const Epoch& e : epochs) values.push_back(e.*field);
      return values;
    }
  };
  const std::string over = network != nullptr ? "" : " (loopback: not root)";
  const std::string security = tls ? "TLS" : "plain text";
  std::vector<Config> configs = {{"PyTorch DataLoader, num_workers=2", peer_epoch},
                                 {"Granary in-process", local_epoch}};
  for (int64_t gbit : rates_gbit) {
    const std::string name =
        absl::StrCat("Granary remote, 2 workers, ", security, ", ", gbit, " Gbit/s", over);
    configs.push_back({name, [&, gbit](int64_t e) { return remote_epoch(*job, gbit, e); }});
    configs.push_back({name + ", normalize on the workers",
                       [&, gbit](int64_t e) { return remote_epoch(*worker_tail_job, gbit, e); }});
  }
  constexpr size_t kPeer = 0, kLocal = 1, kFirstRemote = 2;
  const int reps = absl::GetFlag(FLAGS_repetitions);
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up (page cache, connections).
    for (size_t k = 0; k < configs.size(); ++k) {
      Config& c = configs[(k + rep + 1) % configs.size()];
      ASSIGN_OR_RETURN(Epoch e, c.run(rep + 1));
      if (rep >= 0) c.epochs.push_back(e);
    }
  }

  BenchReport report(
      "remote",
      absl::StrCat("A remote trainer: ResNet-style pipeline, ", size, "x", size, " JPEGs, ",
                   images, " per epoch, batch ", batch_size, ", workers in another network "
                   "namespace behind a rate-limited link", over),
      reps);
  for (const Config& c : configs) {
    report.AddSeries(c.name, "images/s", c.Of(&Epoch::images_per_s));
    report.AddSeries(c.name, "cores busy", c.Of(&Epoch::cores_busy));
  }
  report.AddSeries(configs[kLocal].name, "pipeline CPU ms/image",
                   configs[kLocal].Of(&Epoch::pipeline_cpu_ms_per_image));
  for (size_t k = kFirstRemote; k < configs.size(); ++k) {
    const Config& c = configs[k];
    report.AddSeries(c.name, "link bytes/image", c.Of(&Epoch::wire_bytes_per_image));
    report.AddSeries(c.name, "delivered bytes/image", c.Of(&Epoch::payload_bytes_per_image));
    report.AddSeries(c.name, "trainer CPU ms/image", c.Of(&Epoch::trainer_cpu_ms_per_image));
    report.AddSeries(c.name, "server CPU ms/image", c.Of(&Epoch::server_cpu_ms_per_image));
  }
  const double peer = Median(configs[kPeer].Of(&Epoch::images_per_s));
  const double pipeline_cpu = Median(configs[kLocal].Of(&Epoch::pipeline_cpu_ms_per_image));
  for (size_t k = kFirstRemote; k < configs.size(); k += 2) {  // as deployed
    const Config& c = configs[k];
    const Config& before = configs[k + 1];  // normalize on the workers
    const std::string at = absl::StrCat(rates_gbit[(k - kFirstRemote) / 2], " Gbit/s");
    report.AddHeadline(absl::StrCat("remote ", at, ": normalize in the trainer / on the workers"),
                       Median(c.Of(&Epoch::images_per_s)) / Median(before.Of(&Epoch::images_per_s)),
                       "x");
    report.AddHeadline(absl::StrCat("remote ", security, " ", at, " / DataLoader num_workers=2"),
                       Median(c.Of(&Epoch::images_per_s)) / peer, "x", BenchTarget::AtLeast(2));
    report.AddHeadline(
        absl::StrCat("link bytes per image / the uint8 image (", uint8_image_bytes, " B), ", at),
        Median(c.Of(&Epoch::wire_bytes_per_image)) / uint8_image_bytes, "x",
        BenchTarget::AtMost(1.05));
    report.AddHeadline(absl::StrCat("trainer CPU per image / the in-process pipeline's, ", at),
                       Median(c.Of(&Epoch::trainer_cpu_ms_per_image)) / pipeline_cpu, "x",
                       BenchTarget::AtMost(0.15));
  }
  report.AddNote(
      "All processes share this machine's cores (see 'cores busy'). Link bytes: both directions "
      "through the trainer's veth (on loopback: all of lo's), TCP/IP and TLS overhead included; "
      "delivered bytes: the elements' serialized bytes the reader handed out. As deployed, the "
      "job leaves its normalize to the trainer (JobSpec.tail auto over TCP): workers send uint8 "
      "crops; 'normalize on the workers' is the same job with tail worker.");
  return report.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(
      argc, argv, "remote_bench",
      {.images = 2048, .size = 256, .dir = "/tmp/granary_remote_bench", .quick_images = 256},
      granary::Run);
}
