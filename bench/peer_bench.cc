// Granary side by side with what ML engineers use today, the PyTorch DataLoader (benchmark 1 of
// the suite), and the memory each side's processes need while doing it (benchmark 7).
//
// The same ResNet-style pipeline over the same generated TFRecord files — decode JPEG, random
// crop, random flip, normalize, batch of --batch_size — six ways, in rotating order per round
// after a warm-up round:
//   - PyTorch DataLoader with num_workers = 1 and 2 (bench/pytorch_peer.py under Debian's
//     python3-torch: a map-style Dataset over the TFRecord files, PIL decode, numpy transforms);
//   - Granary through the service: a real dispatcher and workers on 127.0.0.1, a job on 1 worker
//     and a job on 2 workers, read by the client library in this process;
//   - Granary from Python: a job on the same 2 workers read by a Python trainer process through
//     granary.torch.GranaryIterableDataset under DataLoader(num_workers=0)
//     (bench/python_client_peer.py, with --python_path for the granary package);
//   - Granary in-process (granary local's runner).
// Everything shares this machine's cores; each configuration's "cores busy" (CPU seconds of all
// its processes / wall seconds) says how many it used; "trainer CPU" is the reading process's
// own CPU time per image (this process for the C++ client, the Python process for Python). Peak
// RSS: of the dispatcher, a worker and the client (this process; its peak is reset before each
// service epoch) over the service epochs, and of the DataLoader's main process and largest worker.
//
//   bench/peer_bench [--images N] [--size S] [--repetitions R] [--dir D] [--python P]
//                    [--python_path build/python]
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_report.h"
#include "bench/bench_service.h"
#include "bench/bench_setup.h"
#include "bench/process_stats.h"
#include "bench/pytorch_peer_runner.h"
#include "bench/resnet_bench_flags.h"
#include "bench/sample_stats.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "granary/client.h"
#include "pipeline/local_runner.h"

ABSL_FLAG(std::string, python_client_script, "bench/python_client_peer.py",
          "The Granary-from-Python trainer.");
ABSL_FLAG(std::string, python_path, "build/python", "Where the granary Python package is.");
ABSL_FLAG(int64_t, batch_size, 128, "Images per batch, on both sides.");

namespace granary {
namespace {

struct Epoch {
  double images_per_s = 0;
  double cores_busy = 0;
  // The reading process's own CPU time per image; 0: not measured (the DataLoader peers, whose
  // reading process is also the loading process).
  double trainer_cpu_ms_per_image = 0;
};

// The Python trainer (bench/python_client_peer.py): one process reading every epoch of job
// `job_name`, each when asked (its go file), as a trainer reads epochs.
class PythonClient {
 public:
  PythonClient(const std::string& dir, const std::string& address, const std::string& pipeline,
               const std::string& job_name, int num_worker_slots)
      : go_dir_(dir + "/python_client"), what_(absl::GetFlag(FLAGS_python_client_script)) {
    (void)Env::Default()->CreateDirs(go_dir_);
    process_ = std::make_unique<Subprocess>(
        std::vector<std::string>{absl::GetFlag(FLAGS_python), what_, "--dispatcher=" + address,
                                 "--pipeline=" + pipeline, "--job_name=" + job_name,
                                 "--go_dir=" + go_dir_,
                                 absl::StrCat("--num_worker_slots=", num_worker_slots)},
        Subprocess::Stderr::kInherit, "",
        std::vector<std::string>{"PYTHONPATH=" + absl::GetFlag(FLAGS_python_path)});
  }
  ~PythonClient() {
    (void)WriteStringToFile(Env::Default(), go_dir_ + "/stop", "", /*sync=*/false);
    if (process_->WaitFor(std::chrono::seconds(10)) < 0) process_->Kill(SIGKILL);
  }

  // Epoch `epoch` (the next one): its result line.
  absl::StatusOr<google::protobuf::Struct> ReadEpoch(int64_t epoch) {
    RETURN_IF_ERROR(WriteStringToFile(Env::Default(), absl::StrCat(go_dir_, "/go.", epoch), "",
                                      /*sync=*/false));
    const std::string line = process_->ReadLine(std::chrono::minutes(30));
    ASSIGN_OR_RETURN(google::protobuf::Struct result, ResultLine(line, what_));
    if (NumberOf(result, "images") <= 0 || NumberOf(result, "seconds") <= 0) {
      return absl::InternalError(absl::StrCat(what_, " read no images"));
    }
    return result;
  }

 private:
  const std::string go_dir_;
  const std::string what_;
  std::unique_ptr<Subprocess> process_;
};

// CPU seconds used so far by this process and `servers`.
double CpuSecondsWith(const std::vector<pid_t>& servers) {
  double seconds = CpuSecondsOf();
  for (pid_t pid : servers) seconds += CpuSecondsOf(pid);
  return seconds;
}

absl::Status Run() {
  Env* env = Env::Default();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int64_t images = absl::GetFlag(FLAGS_images);
  const int64_t size = absl::GetFlag(FLAGS_size);
  const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
  ASSIGN_OR_RETURN(PipelineDef def, ResnetPipelineFromFlags(env));
  SetOpParam(&def, "batch", "batch_size", batch_size);
  const std::string data_dir = absl::StrCat(dir, "/imagenet_", size, "_", images);
  const PipelineRegistries registries = PipelineRegistries::WithBuiltins();
  ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> local, Pipeline::Create(def, registries));

  ASSIGN_OR_RETURN(BenchService service,
                   StartBenchService(dir + "/cluster", def, {.cluster = {.workers = 2}}));
  const testing::LocalCluster& cluster = *service.cluster;
  ASSIGN_OR_RETURN(
      std::unique_ptr<Job> one,
      service.client->OpenJob(service.dataset, {.name = "one", .seed = 1, .num_worker_slots = 1}));
  ASSIGN_OR_RETURN(
      std::unique_ptr<Job> two,
      service.client->OpenJob(service.dataset, {.name = "two", .seed = 1, .num_worker_slots = 2}));
  const std::vector<pid_t> servers = {cluster.dispatcher_pid(), cluster.worker_pid(0),
                                      cluster.worker_pid(1)};
  const std::vector<std::pair<std::string, pid_t>> roles = {
      {"dispatcher", servers[0]}, {"worker", servers[1]}, {"worker", servers[2]}, {"client", 0}};
  std::map<std::string, int64_t> service_rss;  // role -> peak bytes over the service epochs.
  int64_t peer_rss_main = 0, peer_rss_worker = 0;

  int64_t client_growth = 0;  // The client's peak RSS above its RSS when an epoch starts.
  const auto service_epoch = [&](Job& job, int64_t epoch) -> absl::StatusOr<Epoch> {
    for (const auto& [role, pid] : roles) ResetPeakRss(pid);
    const int64_t client_baseline = RssBytesOf();
    const double cpu_before = CpuSecondsWith(servers);
    const double client_cpu_before = CpuSecondsOf();
    ASSIGN_OR_RETURN(ServiceEpoch read, ReadServiceEpoch(job, epoch));
    for (const auto& [role, pid] : roles) {
      service_rss[role] = std::max(service_rss[role], PeakRssBytesOf(pid));
    }
    client_growth = std::max(client_growth, PeakRssBytesOf() - client_baseline);
    return Epoch{read.rows / read.seconds, (CpuSecondsWith(servers) - cpu_before) / read.seconds,
                 (CpuSecondsOf() - client_cpu_before) * 1e3 / read.rows};
  };
  std::string pipeline_json;
  {
    google::protobuf::util::JsonPrintOptions options;
    if (!google::protobuf::util::MessageToJsonString(def, &pipeline_json, options).ok()) {
      return absl::InternalError("the pipeline does not print as JSON");
    }
  }
  const std::string pipeline_file = dir + "/python_client_pipeline.json";
  RETURN_IF_ERROR(WriteStringToFile(env, pipeline_file, pipeline_json, /*sync=*/false));
  PythonClient python(dir, cluster.dispatcher_address(), pipeline_file, "python-two", 2);
  const auto python_epoch = [&](int64_t epoch) -> absl::StatusOr<Epoch> {
    const double cpu_before = CpuSecondsWith(servers);
    ASSIGN_OR_RETURN(const google::protobuf::Struct line, python.ReadEpoch(epoch));
    const double seconds = NumberOf(line, "seconds");
    const double images_read = NumberOf(line, "images");
    // The servers' CPU from the go signal to the result line (the trainer's waiting included).
    const double server_cpu = CpuSecondsWith(servers) - cpu_before;
    return Epoch{images_read / seconds, (server_cpu + NumberOf(line, "cpu_seconds")) / seconds,
                 NumberOf(line, "cpu_seconds") * 1e3 / images_read};
  };

  const auto peer_epoch = [&](int workers, int64_t epoch) -> absl::StatusOr<Epoch> {
    ASSIGN_OR_RETURN(const DataLoaderEpoch peer,
                     RunDataLoaderEpoch(data_dir, workers, batch_size, epoch));
    peer_rss_main = std::max(peer_rss_main, peer.rss_main);
    peer_rss_worker = std::max(peer_rss_worker, peer.rss_worker);
    return Epoch{peer.images_per_s, peer.cores_busy};
  };
  const auto local_epoch = [&](int64_t epoch) -> absl::StatusOr<Epoch> {
    EpochRunOptions options;
    options.digest = false;
    const double cpu_before = CpuSecondsOf();
    ASSIGN_OR_RETURN(EpochResult run, RunEpochInProcess(*local, 1, epoch, env, options));
    return Epoch{images / run.seconds, (CpuSecondsOf() - cpu_before) / run.seconds};
  };
  struct Config {
    std::string name;
    std::function<absl::StatusOr<Epoch>(int64_t epoch)> run;
    std::vector<double> rates, cores, trainer_cpu;
  };
  std::vector<Config> configs = {
      {"PyTorch DataLoader, num_workers=1", [&](int64_t e) { return peer_epoch(1, e); }},
      {"Granary service, 1 worker", [&](int64_t e) { return service_epoch(*one, e); }},
      {"PyTorch DataLoader, num_workers=2", [&](int64_t e) { return peer_epoch(2, e); }},
      {"Granary service, 2 workers", [&](int64_t e) { return service_epoch(*two, e); }},
      {"Granary in-process", local_epoch},
      {"Granary from Python (PyTorch IterableDataset), 2 workers", python_epoch},
  };
  const int reps = absl::GetFlag(FLAGS_repetitions);
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up (page cache, processes).
    for (size_t k = 0; k < configs.size(); ++k) {
      Config& c = configs[(k + rep + 1) % configs.size()];
      ASSIGN_OR_RETURN(Epoch e, c.run(rep + 1));
      if (rep < 0) continue;
      c.rates.push_back(e.images_per_s);
      c.cores.push_back(e.cores_busy);
      if (e.trainer_cpu_ms_per_image > 0) c.trainer_cpu.push_back(e.trainer_cpu_ms_per_image);
    }
  }

  BenchReport peer("peer",
                   absl::StrCat("Granary vs PyTorch DataLoader: ResNet-style pipeline, ", size, "x",
                                size, " JPEGs, ", images, " per epoch, batch ", batch_size),
                   reps);
  for (const Config& c : configs) {
    peer.AddSeries(c.name, "images/s", c.rates);
    peer.AddSeries(c.name, "cores busy", c.cores);
    if (!c.trainer_cpu.empty()) peer.AddSeries(c.name, "trainer CPU ms/image", c.trainer_cpu);
  }
  const auto ratio = [&](size_t a, size_t b) {
    return Median(configs[a].rates) / Median(configs[b].rates);
  };
  peer.AddHeadline("Granary service 1 worker / DataLoader num_workers=1", ratio(1, 0), "x",
                   BenchTarget::AtLeast(1.5));
  peer.AddHeadline("Granary service 2 workers / DataLoader num_workers=2", ratio(3, 2), "x",
                   BenchTarget::AtLeast(2.5));
  peer.AddHeadline("Granary service 2 workers / in-process", ratio(3, 4), "x",
                   BenchTarget::AtLeast(0.8));
  peer.AddHeadline("Granary in-process / DataLoader num_workers=2", ratio(4, 2), "x",
                   BenchTarget::AtLeast(2.0));
  peer.AddHeadline("Granary from Python 2 workers / C++ client 2 workers", ratio(5, 3), "x",
                   BenchTarget::AtLeast(0.95));
  peer.AddHeadline("Granary from Python 2 workers / DataLoader num_workers=2", ratio(5, 2), "x",
                   BenchTarget::AtLeast(2.5));
  peer.AddNote(
      "The DataLoader reads records without checking their CRCs (Granary checks them); "
      "both sides share the machine's cores, see 'cores busy'.");
  RETURN_IF_ERROR(peer.Finish());

  BenchReport memory("memory",
                     absl::StrCat("Peak resident memory during the peer benchmark (", size, "x",
                                  size, ", batch ", batch_size, ")"),
                     reps);
  const auto megabytes = [](int64_t bytes) { return std::vector<double>{bytes / 1e6}; };
  memory.AddSeries("Granary dispatcher", "MB", megabytes(service_rss["dispatcher"]));
  memory.AddSeries("Granary worker (largest)", "MB", megabytes(service_rss["worker"]));
  memory.AddSeries("Granary client (the reading process)", "MB", megabytes(service_rss["client"]));
  memory.AddSeries("DataLoader main process", "MB", megabytes(peer_rss_main));
  memory.AddSeries("DataLoader worker (largest)", "MB", megabytes(peer_rss_worker));
  memory.AddSeries("Granary client above its baseline while streaming", "MB",
                   megabytes(client_growth));
  const double batch_bytes = double(batch_size) * 224 * 224 * 3 * 4;
  memory.AddHeadline("Granary client's peak RSS above its baseline while streaming",
                     client_growth / batch_bytes, "batches", BenchTarget::AtMost(3));
  memory.AddNote(
      "Granary: VmHWM of each process, reset before every service epoch, the largest over all "
      "service epochs; the client's includes the bench's own in-process pipeline objects. "
      "DataLoader: ru_maxrss of the main process and of its largest worker.");
  return memory.Finish();
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  return granary::ResnetBenchMain(
      argc, argv, "peer_bench",
      {.images = 2048, .size = 256, .dir = "/tmp/granary_peer_bench", .quick_images = 256},
      granary::Run);
}
