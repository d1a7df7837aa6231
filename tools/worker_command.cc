// granary worker: runs tasks for a dispatcher and serves their elements until SIGINT/SIGTERM.
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cache/cache_tier_env.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "grpcpp/server.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/obs_flags.h"
#include "tools/server_files.h"
#include "tools/server_flags.h"
#include "tools/server_startup.h"
#include "tools/tls_flags.h"
#include "tools/udf_flags.h"
#include "worker/grpc_worker_service.h"

GRANARY_COMMAND_BORROWS_FLAG(std::string, dispatcher);
GRANARY_COMMAND_BORROWS_FLAG(std::string, advertise_address);
ABSL_FLAG(std::string, worker_id, "", "Stable identity of this worker (kept across restarts).");
ABSL_FLAG(bool, standby, false,
          "Hold no tasks until the dispatcher fails one over to this worker.");
ABSL_FLAG(std::string, local_to, "",
          "JOB_ID/CONSUMER: a local worker on that trainer's host, running only its local tasks "
          "(started by the client for JobSpec.local_workers; `granary run --local_workers`).");
ABSL_FLAG(bool, take_over_load, false,
          "Started by a provisioner for the load: take a task from the most loaded worker on "
          "joining.");
ABSL_FLAG(int64_t, window_bytes, 256 << 20,
          "Per task: payload bytes produced ahead of the client before the pipeline waits.");
ABSL_FLAG(int64_t, memory_budget_bytes, int64_t{1} << 30,
          "Bytes the tuned stages of a pipeline (parallel_map num_threads 0, prefetch "
          "buffer_size 0) may hold in their buffers, all together.");
ABSL_FLAG(int, threads, 0,
          "If > 0, overrides num_threads of every parallel_map of the pipelines this worker runs.");
ABSL_FLAG(int, heartbeat_interval_ms, 200, "How often to heartbeat the dispatcher.");
ABSL_FLAG(int64_t, register_timeout_ms, 30000,
          "How long to keep trying to register (while the dispatcher is unreachable, or holds "
          "the worker id for a live worker at another address) before exiting.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Where tasks' checkpoints go (a path standbys can read too makes failover fast); "
          "empty = no checkpoints.");
ABSL_FLAG(int64_t, checkpoint_interval_ms, 1000, "How often each running task checkpoints.");
ABSL_FLAG(int, checkpoints_kept, 3, "Checkpoints kept per task (the newest).");
ABSL_FLAG(int64_t, idle_pipeline_ms, 60000,
          "Keep a pipeline no task here runs any more this long (with its UDFs' state: a Python "
          "UDF's warm helper processes) for the next epoch's tasks; 0 drops it at once.");
ABSL_FLAG(std::string, local_transport, "auto",
          "How clients on this host get elements: auto (shared memory where the host offers it, "
          "else TCP), shm (shared memory, or fail to start) or tcp. Remote clients always use "
          "TCP.");
ABSL_FLAG(int64_t, shm_min_bytes, 256 << 10,
          "With shared memory: elements at least this large go by segment, smaller ones by "
          "bytes (each pooled segment is a file descriptor).");

namespace granary {
namespace {

// InvalidArgument naming --advertise_address unless it is empty or HOST:PORT with a port in
// 1-65535.
absl::Status CheckAdvertiseAddress(const std::string& advertised) {
  if (advertised.empty()) return absl::OkStatus();
  const size_t colon = advertised.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(advertised.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--advertise_address=", advertised,
                                                   ": expected HOST:PORT with a port in 1-65535"));
  }
  return absl::OkStatus();
}

}  // namespace

int WorkerCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "granary worker --dispatcher HOST:PORT --worker_id ID [--port P] [--host H] [--standby] "
      "[--window_bytes B] [--threads N] [--checkpoint_dir D] [--checkpoint_interval_ms T] "
      "[--register_timeout_ms T] [--advertise_address HOST:PORT] [--local_transport auto|shm|tcp] "
      "[--local_to JOB/CONSUMER] "
      "[--data_roots DIRS] [--redis_user U] [--redis_password_file F] [--plugin "
      "lib.so] "
      "(--tls_cert C --tls_key K --tls_ca CA | --insecure)");
  ServerStartup startup("worker", argc, argv);
  const auto fail = [&startup](const absl::Status& status) { return startup.Fail(status); };
  if (absl::GetFlag(FLAGS_dispatcher).empty() || absl::GetFlag(FLAGS_worker_id).empty()) {
    return fail(absl::InvalidArgumentError("--dispatcher and --worker_id are required"));
  }
  if (absl::Status logs = startup.InstallLogFormat(absl::GetFlag(FLAGS_worker_id)); !logs.ok()) {
    return fail(logs);
  }
  if (absl::Status secured = startup.Secure(); !secured.ok()) return fail(secured);
  const TransportSecurity& security = startup.security();
  const absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> channel_credentials =
      ChannelCredentialsFor(security);
  if (!channel_credentials.ok()) return fail(channel_credentials.status());
  auto registries = PipelineRegistriesFromFlags();
  if (!registries.ok()) return fail(registries.status());
  absl::StatusOr<DataRoots> data_roots = DataRootsFromFlags();
  if (!data_roots.ok()) return fail(data_roots.status());
  const absl::StatusOr<LocalTransport> local_transport =
      ParseLocalTransport(absl::GetFlag(FLAGS_local_transport));
  if (!local_transport.ok()) return fail(Annotate(local_transport.status(), "--local_transport"));
  const std::string advertised_address = absl::GetFlag(FLAGS_advertise_address);
  if (absl::Status checked = CheckAdvertiseAddress(advertised_address); !checked.ok()) {
    return fail(checked);
  }

  // The operators' endpoint: ready once registered with the dispatcher. Declared after the
  // impl it reads, so destroyed before it; the metrics the impl counts in outlive it.
  MetricRegistry metrics;
  WorkerMetrics worker_metrics(&metrics);
  // Files, and the cache tier a task's --cache_root names (a directory or redis://...).
  const absl::StatusOr<RedisCredentials> redis_credentials = RedisCredentialsFromFlags();
  if (!redis_credentials.ok()) return fail(redis_credentials.status());
  // Under the chaos harness's faults when its variables are set (server_files.h).
  const absl::StatusOr<std::unique_ptr<ServerFiles>> files = ServerFiles::FromEnvironment();
  if (!files.ok()) return fail(files.status());
  CacheTierEnv env((*files)->env(), *redis_credentials);
  std::unique_ptr<WorkerImpl> impl;
  std::atomic<WorkerImpl*> started_impl{nullptr};
  metrics.AddCollector([&started_impl](MetricSamples& out) {
    if (WorkerImpl* w = started_impl.load()) w->CollectMetrics(out);
  });
  absl::StatusOr<std::unique_ptr<HttpServer>> ops = startup.StartOpsServer(metrics);
  if (!ops.ok()) return fail(ops.status());

  // Listen first: the address registered with the dispatcher must already answer.
  GrpcWorkerService service(security.tls());
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = startup.Listen({&service});
  if (!server.ok()) return fail(server.status());
  WorkerOptions options;
  options.worker_id = absl::GetFlag(FLAGS_worker_id);
  options.address = advertised_address.empty() ? startup.address() : advertised_address;
  options.standby = absl::GetFlag(FLAGS_standby);
  options.take_over_load = absl::GetFlag(FLAGS_take_over_load);
  if (const std::string local_to = absl::GetFlag(FLAGS_local_to); !local_to.empty()) {
    const std::vector<std::string> parts = absl::StrSplit(local_to, '/');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &options.local_job_id) ||
        !absl::SimpleAtoi(parts[1], &options.local_consumer) || options.local_job_id < 1 ||
        options.local_consumer < 0) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "--local_to=", local_to, ": expected JOB_ID/CONSUMER, e.g. --local_to=3/0")));
    }
  }
  options.local_transport = *local_transport;
  options.shm_min_bytes = absl::GetFlag(FLAGS_shm_min_bytes);
  options.heartbeat_interval_ms = absl::GetFlag(FLAGS_heartbeat_interval_ms);
  options.runner.data_roots = *std::move(data_roots);
  options.require_capabilities = security.tls();
  options.runner.window_bytes = absl::GetFlag(FLAGS_window_bytes);
  options.parallel_map_threads = absl::GetFlag(FLAGS_threads);
  options.autotune.memory_budget_bytes = absl::GetFlag(FLAGS_memory_budget_bytes);
  options.registries = &*registries;
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.checkpoints_kept = absl::GetFlag(FLAGS_checkpoints_kept);
  options.idle_pipeline_ms = absl::GetFlag(FLAGS_idle_pipeline_ms);
  options.runner.checkpoint_interval_ms = absl::GetFlag(FLAGS_checkpoint_interval_ms);
  options.runner.metrics = &worker_metrics;
  options.runner.env = &env;
  absl::StatusOr<std::unique_ptr<DispatcherConnection>> dispatcher =
      NewGrpcDispatcherConnection(absl::GetFlag(FLAGS_dispatcher), *channel_credentials, 10000);
  if (!dispatcher.ok()) return fail(dispatcher.status());
  auto started =
      WorkerImpl::Start(options, *std::move(dispatcher), absl::GetFlag(FLAGS_register_timeout_ms));
  if (!started.ok()) return fail(started.status());
  impl = std::move(started).value();
  service.set_impl(impl.get());
  started_impl = impl.get();
  startup.ServeUntilTerminated(ops->get(), **server);
  service.set_impl(nullptr);
  return 0;
}

}  // namespace granary
