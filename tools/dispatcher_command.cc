// granary dispatcher: serves the dispatcher over gRPC until SIGINT or SIGTERM.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cache/cache_op_declarations.h"
#include "cache/cache_tier_env.h"
#include "cache/redis_env.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "dispatcher/caller.h"
#include "dispatcher/grpc_dispatcher_service.h"
#include "dispatcher/policy/job_metrics.h"
#include "dispatcher/provisioner.h"
#include "dispatcher/request_limits.h"
#include "etcd/etcd_client.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "obs/status_page.h"
#include "replication/dispatcher_replica.h"
#include "replication/etcd_journal_url.h"
#include "security/bearer_tokens.h"
#include "security/capability.h"
#include "tools/commands.h"
#include "tools/obs_flags.h"
#include "tools/server_files.h"
#include "tools/server_flags.h"
#include "tools/server_startup.h"
#include "tools/status_json.h"
#include "tools/tls_flags.h"
#include "tools/udf_flags.h"

ABSL_FLAG(std::string, journal_dir, "",
          "Directory of the dispatcher's RocksDB journal (a single dispatcher).");
ABSL_FLAG(std::string, journal, "",
          "etcd://HOST:PORT[,HOST:PORT...]/PREFIX: a replicated dispatcher's journal in etcd, "
          "instead of --journal_dir. Run 3 (or 5) dispatchers with it, each with its own "
          "--replica_id: etcd elects one to lead; the others are hot standbys that redirect "
          "callers to it (docs/design.md, \"The replicated dispatcher\").");
ABSL_FLAG(std::string, replica_id, "",
          "With --journal etcd://...: this replica's id, unique among the live replicas.");
ABSL_FLAG(std::string, advertise_address, "",
          "HOST:PORT where callers reach this server when it is not --host:--port (a proxy or a "
          "NAT in front of it); default --host:--port. A dispatcher, with --journal etcd://...: "
          "where clients and workers reach this replica (what the other replicas redirect them "
          "to). A worker: the address it registers with the dispatcher, which hands it to "
          "clients (`granary chaos` puts a fault-injecting proxy there).");
ABSL_FLAG(int64_t, lease_ttl, 1,
          "With --journal etcd://...: seconds without a keep-alive after which etcd ends a "
          "replica's term, so a crashed leader is replaced this long after it died (etcd raises "
          "it to 1.5 of its election timeouts).");
ABSL_FLAG(int64_t, snapshot_every, 10000, "Write a state snapshot every N journal records.");
ABSL_FLAG(int64_t, worker_timeout_ms, 5000, "Declare a worker lost after this much silence.");
ABSL_FLAG(std::string, cache_root, "",
          "Where the Put/Get caches live: a directory (a filesystem every worker mounts at the "
          "same path) or redis://HOST:PORT/PREFIX (the in-memory tier: a Redis every worker "
          "reaches). Jobs with a cache policy need it.");
ABSL_FLAG(int64_t, cache_capacity_bytes, 0,
          "The most bytes the caches under --cache_root may take (0: no limit): least recently "
          "used caches no epoch reads are evicted to make room, and cache_policy auto caches "
          "only where its estimated cache fits.");
ABSL_FLAG(int64_t, cache_profile_records, 64,
          "cache_policy auto: source records a worker profiles the pipeline on before the "
          "job's first epoch.");
ABSL_FLAG(int64_t, job_retention_ms, 10 * 60 * 1000,
          "Retire a job whose epochs are all finished once no client has asked about it for "
          "this long (its state is dropped; its name then opens a new job).");
ABSL_FLAG(std::string, tokens_file, "",
          "Bearer tokens of clients, one '<token> <client name>' per line (SECURITY.md); needs "
          "TLS. Clients may also authenticate with certificates.");
ABSL_FLAG(std::vector<std::string>, admin_clients, {},
          "Clients (certificate or token names) whose `granary status` shows every job; every "
          "other client sees only the jobs it may read (SECURITY.md).");
ABSL_FLAG(std::vector<std::string>, python_udf_clients, {},
          "Clients (certificate or token names; '*': every client) that may register pipelines "
          "running Python functions (Dataset.map(fn)) on workers started with "
          "--allow_python_udfs: that is code execution on the workers (SECURITY.md). Without "
          "TLS every caller may.");
ABSL_FLAG(int64_t, max_jobs_per_client, granary::ClientLimits().jobs,
          "Live jobs one authenticated client may own (SECURITY.md).");
ABSL_FLAG(int64_t, max_readers_per_client, granary::ClientLimits().readers,
          "Consumers summed over the live jobs one authenticated client owns.");
ABSL_FLAG(int64_t, max_pipeline_bytes, granary::ClientLimits().pipeline_bytes,
          "Largest pipeline definition accepted, in serialized bytes.");
ABSL_FLAG(int64_t, max_pipeline_ops, granary::ClientLimits().pipeline_ops,
          "Most ops a pipeline may have.");
ABSL_FLAG(int64_t, policy_period_ms, 2000,
          "How often autoscaled jobs are measured and decided on (issue 17).");
ABSL_FLAG(std::string, provisioner, "none",
          "How the dispatcher gets more remote workers, or fewer, as its jobs' tasks want "
          "(issue 17): none, local (starts `granary worker` processes of this binary on this "
          "host) or command (runs --provision_command with the count).");
ABSL_FLAG(std::string, provision_command, "",
          "With --provisioner=command: a shell command; {n} is replaced by the worker count, e.g. "
          "'kubectl scale statefulset granary-worker --replicas={n}'.");
ABSL_FLAG(int32_t, min_workers, 0, "With a provisioner: the fewest workers it keeps.");
ABSL_FLAG(int32_t, max_workers, 0, "With a provisioner: the most workers it starts.");
ABSL_FLAG(std::string, provisioned_worker_flags, "",
          "With --provisioner=local: more flags of each worker it starts, space-separated; {id} "
          "is replaced by the worker's id (e.g. --tls_cert=/d/tls/{id}.pem).");
ABSL_FLAG(std::string, provisioned_worker_log_dir, "",
          "With --provisioner=local: each worker's stderr goes to DIR/<id>.log.");
ABSL_FLAG(double, worker_price_per_hour, granary::Prices().worker_per_hour,
          "What a remote worker costs per hour, for placement policies (Pecan's default).");
ABSL_FLAG(double, trainer_price_per_hour, granary::Prices().trainer_per_hour,
          "What the trainer's host costs per hour, for placement policies (Pecan's default).");
ABSL_FLAG(bool, new_cluster, false,
          "Start a new, empty cluster although the evidence says the journal of an existing one "
          "was lost: a GRANARY-JOURNAL-LOST marker in --journal_dir (the directory was deleted "
          "while a dispatcher ran), or a new journal over a --cache_root whose GRANARY-CLUSTER "
          "names a cluster. Workers then drop that cluster's tasks and its caches are deleted "
          "as garbage; only for an operator who means to start over.");
ABSL_FLAG(bool, check_invariants, false,
          "Check the state's invariants after every journal record and abort on a violation "
          "(for tests and chaos runs: the check walks the whole state).");

namespace granary {

int DispatcherCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "granary dispatcher (--journal_dir D | --journal etcd://H:P[,H:P...]/PREFIX "
      "--replica_id ID [--advertise_address A] [--lease_ttl S]) [--port P] [--host H] "
      "[--snapshot_every N] "
      "[--worker_timeout_ms T] [--cache_root C] [--cache_capacity_bytes B] [--data_roots DIRS] "
      "[--job_retention_ms R] [--redis_user U] [--redis_password_file F] "
      "[--new_cluster] [--check_invariants] [--plugin lib.so] [--provisioner local|command "
      "--max_workers N "
      "[--min_workers M] [--provision_command CMD]] (--tls_cert C --tls_key K --tls_ca CA "
      "[--tokens_file F] [--admin_clients A,B] | --insecure)");
  ServerStartup startup("dispatcher", argc, argv);
  const auto fail = [&startup](const absl::Status& status) { return startup.Fail(status); };
  if (absl::Status logs = startup.InstallLogFormat(""); !logs.ok()) return fail(logs);
  const std::string journal_dir = absl::GetFlag(FLAGS_journal_dir);
  const std::string journal_url = absl::GetFlag(FLAGS_journal);
  if (journal_dir.empty() == journal_url.empty()) {
    return fail(absl::InvalidArgumentError(
        "give either --journal_dir (a single dispatcher's local journal) or --journal "
        "etcd://HOST:PORT[,HOST:PORT...]/PREFIX (a replica of a replicated dispatcher)"));
  }
  std::optional<EtcdJournalUrl> etcd_journal;
  if (!journal_url.empty()) {
    absl::StatusOr<EtcdJournalUrl> parsed = ParseEtcdJournalUrl(journal_url);
    if (!parsed.ok()) return fail(Annotate(parsed.status(), "--journal"));
    if (absl::GetFlag(FLAGS_replica_id).empty()) {
      return fail(absl::InvalidArgumentError("--journal etcd://... needs --replica_id"));
    }
    if (absl::GetFlag(FLAGS_provisioner) != "none") {
      return fail(absl::InvalidArgumentError(
          "--provisioner is not supported with a replicated journal yet (--journal)"));
    }
    etcd_journal = *std::move(parsed);
  }
  if (absl::Status secured = startup.Secure(); !secured.ok()) return fail(secured);
  const TransportSecurity& security = startup.security();
  // The dispatcher validates pipelines and lists their splits: declarations are enough.
  auto registries = WithPluginsFromFlags(PipelineDeclarationsWithCache());
  if (!registries.ok()) return fail(registries.status());
  absl::StatusOr<DataRoots> data_roots = DataRootsFromFlags();
  if (!data_roots.ok()) return fail(data_roots.status());
  DispatcherOptions options;
  options.data_roots = *std::move(data_roots);
  // The replicated journal's etcd client: TLS (client certificates) when the cluster runs TLS.
  std::unique_ptr<etcd::EtcdClient> etcd_client;
  if (etcd_journal.has_value()) {
    etcd::EtcdClientOptions client_options;
    client_options.endpoints = etcd_journal->endpoints;
    client_options.security = security;
    absl::StatusOr<std::unique_ptr<etcd::EtcdClient>> client =
        etcd::EtcdClient::Create(std::move(client_options));
    if (!client.ok()) return fail(Annotate(client.status(), "--journal"));
    etcd_client = *std::move(client);
  }
  // The dispatcher's files (capability key, journal, cache manifests), under the chaos
  // harness's faults when its variables are set (server_files.h).
  const absl::StatusOr<std::unique_ptr<ServerFiles>> files = ServerFiles::FromEnvironment();
  if (!files.ok()) return fail(files.status());
  // Capabilities: a key kept beside the journal, so that a restart keeps issued ones valid (a
  // replica uses the key its journal's replicas share: DispatcherReplica::Start).
  if (!etcd_journal.has_value()) {
    if (absl::Status made = Env::Default()->CreateDirs(journal_dir); !made.ok()) return fail(made);
    absl::StatusOr<CapabilityKey> key =
        CapabilityKey::LoadOrCreate(journal_dir + "/capability.key", (*files)->env());
    if (!key.ok()) return fail(key.status());
    options.capability_key = *std::move(key);
  }
  std::optional<BearerTokens> tokens;
  if (!absl::GetFlag(FLAGS_tokens_file).empty()) {
    absl::StatusOr<BearerTokens> loaded = BearerTokens::Load(absl::GetFlag(FLAGS_tokens_file));
    if (!loaded.ok()) return fail(Annotate(loaded.status(), "--tokens_file"));
    if (!security.tls()) {
      return fail(absl::InvalidArgumentError(
          "--tokens_file needs TLS: bearer tokens are never sent in plain text"));
    }
    tokens = *std::move(loaded);
  }
  options.journal_dir = journal_dir;
  options.snapshot_every = absl::GetFlag(FLAGS_snapshot_every);
  options.worker_timeout_ms = absl::GetFlag(FLAGS_worker_timeout_ms);
  options.registries = &*registries;
  options.cache_root = absl::GetFlag(FLAGS_cache_root);
  if (const std::string redis = RedisServerOf(options.cache_root); !redis.empty()) {
    if (const absl::Status url = RedisAddressOf(redis).status(); !url.ok()) {
      return fail(Annotate(url, "--cache_root"));
    }
  }
  const absl::StatusOr<RedisCredentials> redis_credentials = RedisCredentialsFromFlags();
  if (!redis_credentials.ok()) return fail(redis_credentials.status());
  options.cache_capacity_bytes = absl::GetFlag(FLAGS_cache_capacity_bytes);
  options.cache_profile_records = absl::GetFlag(FLAGS_cache_profile_records);
  if (options.cache_capacity_bytes < 0) {
    return fail(absl::InvalidArgumentError(absl::StrCat("--cache_capacity_bytes ",
                                                        options.cache_capacity_bytes,
                                                        ": must be 0 (no limit) or more")));
  }
  if (options.cache_profile_records < 1) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "--cache_profile_records ", options.cache_profile_records, ": must be at least 1")));
  }
  options.job_retention_ms = absl::GetFlag(FLAGS_job_retention_ms);
  options.check_invariants = absl::GetFlag(FLAGS_check_invariants);
  options.new_cluster = absl::GetFlag(FLAGS_new_cluster);
  options.policy_period_ms = std::max<int64_t>(absl::GetFlag(FLAGS_policy_period_ms), 100);
  options.prices.worker_per_hour = absl::GetFlag(FLAGS_worker_price_per_hour);
  options.prices.trainer_per_hour = absl::GetFlag(FLAGS_trainer_price_per_hour);
  const std::string provisioner = absl::GetFlag(FLAGS_provisioner);
  if (provisioner != "none" && provisioner != "local" && provisioner != "command") {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--provisioner '", provisioner, "' is none of none, local, command")));
  }
  if (provisioner == "command" && absl::GetFlag(FLAGS_provision_command).empty()) {
    return fail(absl::InvalidArgumentError("--provisioner=command needs --provision_command"));
  }
  if (provisioner != "none" &&
      (absl::GetFlag(FLAGS_max_workers) < 1 || absl::GetFlag(FLAGS_min_workers) < 0 ||
       absl::GetFlag(FLAGS_min_workers) > absl::GetFlag(FLAGS_max_workers))) {
    return fail(absl::InvalidArgumentError(
        "a provisioner needs 0 <= --min_workers <= --max_workers and --max_workers >= 1"));
  }
  options.admin_clients = absl::GetFlag(FLAGS_admin_clients);
  options.python_udf_clients = absl::GetFlag(FLAGS_python_udf_clients);
  options.limits.jobs = absl::GetFlag(FLAGS_max_jobs_per_client);
  options.limits.readers = absl::GetFlag(FLAGS_max_readers_per_client);
  options.limits.pipeline_bytes = absl::GetFlag(FLAGS_max_pipeline_bytes);
  options.limits.pipeline_ops = absl::GetFlag(FLAGS_max_pipeline_ops);
  // The operators' endpoint serves from before the journal's replay (liveness) and reports
  // ready after it. Declared after the impl it reads, so destroyed before it; the metrics the
  // impl's journal counts in outlive it.
  MetricRegistry metrics;
  // Files, and the cache tier --cache_root names (a directory or redis://HOST:PORT/PREFIX).
  CacheTierEnv env((*files)->env(), *redis_credentials);
  // Which impl serves now: the one this process opened, or — replicated — the leader's while
  // this replica leads. Before either exists, every call is refused as "replaying".
  std::shared_ptr<DispatcherImpl> single;
  std::unique_ptr<DispatcherReplica> replica;
  std::atomic<bool> opened{false};
  const DispatcherImplSource current = [&]() -> absl::StatusOr<std::shared_ptr<DispatcherImpl>> {
    if (!opened.load()) return absl::UnavailableError("the dispatcher is replaying its journal");
    if (replica != nullptr) return replica->Leader();
    return single;
  };
  metrics.AddCollector([&current, &replica, &opened](MetricSamples& out) {
    if (absl::StatusOr<std::shared_ptr<DispatcherImpl>> d = current(); d.ok()) {
      (*d)->CollectMetrics(out);
    }
    if (opened.load() && replica != nullptr) replica->CollectMetrics(out);
  });
  // The HTTP port has no authentication: on a TLS cluster it shows what an unprivileged
  // authenticated client would see (every worker, and the jobs without an owner).
  const Caller page_caller{security.tls(), "status-page", false};
  absl::StatusOr<std::unique_ptr<HttpServer>> ops = startup.StartOpsServer(
      metrics,
      {{"/",
        [](const std::string&) {
          return HttpResponse{200, "text/html; charset=utf-8", std::string(kStatusPageHtml)};
        }},
       {"/status.json", [&current, page_caller](const std::string&) {
          const absl::StatusOr<std::shared_ptr<DispatcherImpl>> d = current();
          if (!d.ok()) {
            return HttpResponse{
                503, "application/json",
                absl::StrCat(R"({"error":")", absl::CEscape(d.status().message()), "\"}")};
          }
          GetStatusRequest request;
          request.set_summary(true);
          GetStatusResponse status;
          if (const absl::Status s = (*d)->GetStatus(request, &status, page_caller); !s.ok()) {
            return HttpResponse{500, "application/json",
                                absl::StrCat(R"({"error":")", absl::CEscape(s.message()), "\"}")};
          }
          return HttpResponse{200, "application/json", StatusJson(status)};
        }}});
  if (!ops.ok()) return fail(ops.status());
  options.metrics = &metrics;
  options.env = &env;
  options.journal_file_system = (*files)->journal_file_system();
  options.sync_ledger = (*files)->ledger();
  if (!etcd_journal.has_value()) {
    // Recover before listening: nothing is served until replay is complete.
    absl::StatusOr<std::unique_ptr<DispatcherImpl>> impl = DispatcherImpl::Open(options);
    if (!impl.ok()) return fail(impl.status());
    single = *std::move(impl);
    opened = true;
  }

  GrpcDispatcherService service(current, security.tls(), tokens.has_value() ? &*tokens : nullptr);
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = startup.Listen({&service});
  if (!server.ok()) return fail(server.status());
  if (etcd_journal.has_value()) {
    // A replica listens first (its address is what the others redirect to), then follows the
    // journal and campaigns; until it leads it refuses every call, naming the leader.
    DispatcherReplicaOptions replica_options;
    replica_options.dispatcher = options;
    replica_options.me.set_replica_id(absl::GetFlag(FLAGS_replica_id));
    replica_options.me.set_address(absl::GetFlag(FLAGS_advertise_address).empty()
                                       ? startup.address()
                                       : absl::GetFlag(FLAGS_advertise_address));
    replica_options.journal.prefix = etcd_journal->prefix;
    replica_options.journal.metrics = &metrics;
    replica_options.lease_ttl_seconds = absl::GetFlag(FLAGS_lease_ttl);
    absl::StatusOr<std::unique_ptr<DispatcherReplica>> started =
        DispatcherReplica::Start(etcd_client.get(), std::move(replica_options));
    if (!started.ok()) return fail(started.status());
    replica = *std::move(started);
    opened = true;
  } else if (provisioner == "local") {
    LocalProvisionerOptions local;
    local.binary = SelfExecutablePath();
    local.dispatcher_address = startup.address();
    local.max_workers = absl::GetFlag(FLAGS_max_workers);
    local.flags =
        absl::StrSplit(absl::GetFlag(FLAGS_provisioned_worker_flags), ' ', absl::SkipEmpty());
    local.log_dir = absl::GetFlag(FLAGS_provisioned_worker_log_dir);
    single->SetProvisioner(NewLocalProvisioner(std::move(local)), absl::GetFlag(FLAGS_min_workers),
                           absl::GetFlag(FLAGS_max_workers));
  } else if (provisioner == "command") {
    single->SetProvisioner(NewCommandProvisioner(absl::GetFlag(FLAGS_provision_command)),
                           absl::GetFlag(FLAGS_min_workers), absl::GetFlag(FLAGS_max_workers));
  }
  startup.ServeUntilTerminated(ops->get(), **server);
  // Then the server and the ops endpoint are destroyed, and the replica (declared before them)
  // resigns: another takes over at once.
  return 0;
}

}  // namespace granary
