// granary cluster: a local dispatcher and N workers (+ M standbys) as child processes, for
// trying Granary on one machine. With --replicas R > 1 the dispatcher is replicated (issue 32):
// a local etcd of 3 members (etcd/local_etcd_cluster.h, data in D/etcd) and R dispatcher
// replicas journaling to it; workers and clients are given every replica's address. Prints every
// process's address and pid, supervises them (cluster_supervisor.h: every exit is reported;
// --restart restarts a dead process with the same id and port after a back-off, SIGHUP restarts the
// dead ones at once), and stops them all on SIGINT/SIGTERM (SIGTERM, then SIGKILL after 5 s).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/env.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "etcd/etcd_client.h"
#include "etcd/local_etcd_cluster.h"
#include "google/protobuf/util/json_util.h"
#include "proto/client.pb.h"
#include "security/certificate_authority.h"
#include "security/peer_identity.h"
#include "tools/cluster_supervisor.h"
#include "tools/command_flags.h"
#include "tools/commands.h"
#include "tools/server_flags.h"
#include "tools/tls_flags.h"

ABSL_DECLARE_FLAG(std::string, journal_dir);
// Of the server and transport-security flags (server_flags.h, tls_flags.h), those the cluster
// passes on to the processes it starts.
GRANARY_COMMAND_BORROWS_FLAG(std::string, host);
GRANARY_COMMAND_BORROWS_FLAG(int, port);
GRANARY_COMMAND_BORROWS_FLAG(std::vector<std::string>, data_roots);
GRANARY_COMMAND_BORROWS_FLAG(std::string, redis_user);
GRANARY_COMMAND_BORROWS_FLAG(std::string, redis_password_file);
GRANARY_COMMAND_BORROWS_FLAG(bool, insecure);
GRANARY_COMMAND_BORROWS_FLAG(std::string, cache_root);
// The worker's flag (udf_flags.cc), given to the cluster: its workers run Python functions, for
// the cluster's client only (the dispatcher's --python_udf_clients=operator; SECURITY.md).
GRANARY_COMMAND_BORROWS_FLAG(bool, allow_python_udfs);
ABSL_FLAG(int, workers, 2, "Workers to start (with --max_workers: the fewest kept).");
// The dispatcher's flag, read here too: with it the dispatcher's local provisioner starts the
// workers, between --workers and --max_workers as the jobs' tasks want (issue 17).
GRANARY_COMMAND_BORROWS_FLAG(int32_t, max_workers);
// `--standby M` on the command line (the worker's --standby is a boolean flag of the same
// binary, so ClusterCommand renames it before parsing).
ABSL_FLAG(int, cluster_standby, 0,
          "Standby workers to start (they take over tasks of lost workers); given as --standby M.");
ABSL_FLAG(std::string, dir, "", "Directory for the journal and the processes' logs.");
ABSL_FLAG(int64_t, cluster_worker_timeout_ms, 2000,
          "The dispatcher's --worker_timeout_ms (a lost worker's tasks move after this).");
ABSL_FLAG(int, replicas, 1,
          "Dispatcher replicas: 1 is a single dispatcher journaling to D/journal; more run a "
          "local etcd of 3 members (D/etcd) and that many replicas journaling to it.");
ABSL_FLAG(bool, restart, false,
          "Restart a dispatcher or worker that dies, with the same id and port, after a back-off "
          "(0.25 s doubling to 30 s). Without it a death is reported and SIGHUP restarts.");

namespace granary {
namespace {

// Writes <dir>/client.json, the client configuration (granary/client_config.h) of the client
// `security` at the dispatcher at `address` (replicas: their addresses, comma-separated), naming
// its files relative to `dir` (so the file works from any working directory). Returns its path.
absl::StatusOr<std::string> WriteClientConfig(const std::string& dir, const std::string& address,
                                              const TransportSecurity& security) {
  ClientConfig config;
  config.set_dispatcher(address);
  const auto in_dir = [&dir](const std::string& path) {
    return std::string(absl::StripPrefix(path, dir + "/"));
  };
  if (security.insecure) {
    config.set_insecure(true);
  } else {
    config.set_tls_ca(in_dir(security.ca_file));
    config.set_tls_cert(in_dir(security.cert_file));
    config.set_tls_key(in_dir(security.key_file));
  }
  google::protobuf::util::JsonPrintOptions print;
  print.add_whitespace = true;
  print.preserve_proto_field_names = true;
  std::string json;
  if (const auto printed = google::protobuf::util::MessageToJsonString(config, &json, print);
      !printed.ok()) {
    return absl::InternalError(absl::StrCat("client config: ", std::string(printed.message())));
  }
  const std::string path = dir + "/client.json";
  RETURN_IF_ERROR(WriteStringToFile(Env::Default(), path, json, /*sync=*/false));
  return path;
}

// Starts a local etcd of 3 members (data in <dir>/etcd; TLS with `ca`'s certificates unless `ca`
// is null) under `supervisor`, waits until it is ready, then starts `replicas` dispatcher
// replicas "replica-<i>" with `dispatcher_argv` (their common flags) journaling to it, at
// `base_port` + i (or free ports when `base_port` is 0). Returns the replicas' addresses,
// comma-separated.
absl::StatusOr<std::string> StartReplicas(ClusterSupervisor& supervisor, CertificateAuthority* ca,
                                          const std::string& dir, int replicas, int base_port,
                                          const std::vector<std::string>& dispatcher_argv) {
  etcd::LocalEtcdOptions etcd_options;
  etcd_options.dir = dir + "/etcd";
  etcd_options.members = 3;
  ASSIGN_OR_RETURN(etcd_options.security, LocalSecurityFor(ca, "etcd", "granary://etcd"));
  ASSIGN_OR_RETURN(const etcd::LocalEtcdCluster local_etcd,
                   etcd::LocalEtcdCluster::Plan(etcd_options));
  for (int i = 0; i < local_etcd.size(); ++i) {
    RETURN_IF_ERROR(supervisor.StartOnLoopbackPort(
        "etcd", absl::StrCat("etcd-", i), local_etcd.Argv(i), local_etcd.members()[i].client_port));
  }
  {
    ASSIGN_OR_RETURN(const std::unique_ptr<etcd::EtcdClient> client,
                     etcd::EtcdClient::Create(local_etcd.ClientOptions()));
    RETURN_IF_ERROR(local_etcd.AwaitReady(*client, absl::Now() + absl::Minutes(1)));
  }
  const std::string journal =
      absl::StrCat("--journal=etcd://", absl::StrJoin(local_etcd.endpoints(), ","), "/granary");
  std::vector<std::string> addresses;
  for (int i = 0; i < replicas; ++i) {
    std::vector<std::string> argv = dispatcher_argv;
    argv.push_back(journal);
    argv.push_back(absl::StrCat("--replica_id=replica-", i));
    argv.push_back(absl::StrCat("--port=", base_port == 0 ? 0 : base_port + i));
    ASSIGN_OR_RETURN(std::string address,
                     supervisor.Start("dispatcher", absl::StrCat("replica-", i), std::move(argv)));
    addresses.push_back(std::move(address));
  }
  return absl::StrJoin(addresses, ",");
}

// Whether the command-line argument `arg` sets the flag `name`, in any of Abseil's spellings
// (-name, --name, --name=value, --noname for a boolean).
bool IsFlagNamed(absl::string_view arg, absl::string_view name) {
  if (!absl::ConsumePrefix(&arg, "-")) return false;
  absl::ConsumePrefix(&arg, "-");
  if (!absl::ConsumePrefix(&arg, name) && !(absl::ConsumePrefix(&arg, "no") &&
                                            absl::ConsumePrefix(&arg, name))) {
    return false;
  }
  return arg.empty() || arg[0] == '=';
}

}  // namespace

int ClusterCommand(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "granary cluster --workers N [--standby M | --max_workers K] [--replicas R] [--port P] "
      "--dir D [--restart] "
      "[--data_roots DIRS (default: ./data if it exists)] [--insecure (default: TLS with a "
      "throwaway CA in D/tls)] [--allow_python_udfs] [-- extra worker flags, e.g. "
      "--python_interpreter PY]");
  // Rename --standby M / --standby=M (before any "--") to --cluster_standby.
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "--standby" && i + 1 < args.size()) {
      args[i] = "--cluster_standby=" + args[i + 1];
      args.erase(args.begin() + i + 1);
    } else if (args[i].rfind("--standby=", 0) == 0) {
      args[i] = "--cluster_standby=" + args[i].substr(10);
    }
  }
  std::vector<char*> arg_pointers;
  for (std::string& a : args) arg_pointers.push_back(a.data());
  std::vector<char*> rest =
      ParseCommandFlags(static_cast<int>(arg_pointers.size()), arg_pointers.data());
  // Given as a worker flag, --allow_python_udfs would let the workers run Python functions the
  // dispatcher grants nobody: refused, naming the way.
  for (size_t r = 1; r < rest.size(); ++r) {
    if (IsFlagNamed(rest[r], "allow_python_udfs")) {
      std::fprintf(stderr,
                   "granary cluster: '%s' after --: give --allow_python_udfs to granary cluster "
                   "itself (before --), which lets its workers run Python functions and its "
                   "client register them\n",
                   rest[r]);
      return 2;
    }
  }
  BlockSupervisorSignals();
  const std::string dir = absl::GetFlag(FLAGS_dir);
  if (dir.empty()) {
    std::fprintf(stderr, "granary cluster: --dir is required\n");
    return 2;
  }
  if (!Env::Default()->CreateDirs(dir + "/logs").ok()) {
    std::fprintf(stderr, "granary cluster: cannot create %s/logs\n", dir.c_str());
    return 1;
  }
  // Data roots: --data_roots, else the working directory's data folder when there is one.
  std::vector<std::string> roots = absl::GetFlag(FLAGS_data_roots);
  if (roots.empty() && Env::Default()->FileExists("data")) roots = {"data"};
  const absl::StatusOr<DataRoots> data_roots = DataRoots::Create(roots);
  if (!data_roots.ok()) {
    std::fprintf(stderr, "granary cluster: --data_roots: %s\n",
                 std::string(data_roots.status().message()).c_str());
    return 2;
  }
  const std::string data_roots_flag = "--data_roots=" + absl::StrJoin(data_roots->roots(), ",");
  const std::string host = absl::GetFlag(FLAGS_host);
  // Transport security: --insecure, or (the default) TLS with a throwaway CA in D/tls that
  // issues the dispatcher's, each worker's (naming its id) and one client certificate.
  const auto no_certificates = [&dir](const absl::Status& status) {
    std::fprintf(stderr, "granary cluster: making certificates in %s/tls: %s\n", dir.c_str(),
                 std::string(status.message()).c_str());
    return 1;
  };
  std::unique_ptr<CertificateAuthority> ca;
  if (!absl::GetFlag(FLAGS_insecure)) {
    absl::StatusOr<std::unique_ptr<CertificateAuthority>> made =
        CertificateAuthority::Create(dir + "/tls");
    if (!made.ok()) return no_certificates(made.status());
    ca = *std::move(made);
  }
  const absl::StatusOr<TransportSecurity> dispatcher_security =
      LocalSecurityFor(ca.get(), "dispatcher", kDispatcherIdentityUri, {host});
  if (!dispatcher_security.ok()) return no_certificates(dispatcher_security.status());
  const absl::StatusOr<TransportSecurity> client_security =
      LocalSecurityFor(ca.get(), "client", ClientIdentityUri("operator"));
  if (!client_security.ok()) return no_certificates(client_security.status());
  const std::string self = SelfExecutablePath();
  const int base_port = absl::GetFlag(FLAGS_port);
  ClusterSupervisorOptions options;
  options.restart = absl::GetFlag(FLAGS_restart);
  options.log_dir = dir + "/logs";
  ClusterSupervisor supervisor(options);
  const auto fail = [&supervisor](const absl::Status& status) {
    if (!absl::IsCancelled(status)) {
      std::fprintf(stderr, "granary cluster: %s\n", std::string(status.message()).c_str());
    }
    supervisor.StopAll();
    return 1;
  };

  const int replicas = absl::GetFlag(FLAGS_replicas);
  if (replicas < 1) {
    return fail(
        absl::InvalidArgumentError(absl::StrCat("--replicas must be at least 1, is ", replicas)));
  }
  // The flags every dispatcher (replica) has; its journal and port come below.
  std::vector<std::string> dispatcher_argv = {
      self, "dispatcher",
      "--cache_root=" + (absl::GetFlag(FLAGS_cache_root).empty() ? dir + "/cache"
                                                                 : absl::GetFlag(FLAGS_cache_root)),
      data_roots_flag, absl::StrCat("--host=", host),
      absl::StrCat("--worker_timeout_ms=", absl::GetFlag(FLAGS_cluster_worker_timeout_ms)),
      // The printed client flags are the operator's: `granary status` with them shows every job.
      "--admin_clients=operator"};
  for (const std::string& flag : TransportSecurityFlags(*dispatcher_security)) {
    dispatcher_argv.push_back(flag);
  }
  // A redis:// cache root is reached by the dispatcher and every worker, authenticated alike.
  const std::vector<std::string> redis_flags = RedisCredentialFlags();
  dispatcher_argv.insert(dispatcher_argv.end(), redis_flags.begin(), redis_flags.end());
  const int max_workers = absl::GetFlag(FLAGS_max_workers);
  // Each worker's flags but its id, port and certificate.
  std::vector<std::string> worker_flags = {data_roots_flag, absl::StrCat("--host=", host)};
  worker_flags.insert(worker_flags.end(), redis_flags.begin(), redis_flags.end());
  for (size_t r = 1; r < rest.size(); ++r) worker_flags.push_back(rest[r]);
  // Workers that run Python functions run them for the cluster's client (the "operator"
  // certificate it prints the flags of), and no other (SECURITY.md).
  if (absl::GetFlag(FLAGS_allow_python_udfs)) {
    worker_flags.push_back("--allow_python_udfs");
    dispatcher_argv.push_back("--python_udf_clients=operator");
  }
  if (max_workers > 0) {
    if (absl::GetFlag(FLAGS_cluster_standby) > 0 || max_workers < absl::GetFlag(FLAGS_workers)) {
      return fail(absl::InvalidArgumentError(
          "--max_workers must be at least --workers, and takes no --standby (idle workers are "
          "the standbys)"));
    }
    // Certificates for every id the provisioner may use; its flags name them by {id}.
    std::vector<std::string> provisioned = worker_flags;
    for (int i = 0; i < max_workers; ++i) {
      const std::string name = absl::StrCat("worker-", i);
      const absl::StatusOr<TransportSecurity> security =
          LocalSecurityFor(ca.get(), name, WorkerIdentityUri(name), {host});
      if (!security.ok()) return fail(security.status());
      if (i > 0) continue;
      for (const std::string& flag : TransportSecurityFlags(*security)) {
        provisioned.push_back(absl::StrReplaceAll(flag, {{name, "{id}"}}));
      }
    }
    dispatcher_argv.push_back("--provisioner=local");
    dispatcher_argv.push_back(absl::StrCat("--min_workers=", absl::GetFlag(FLAGS_workers)));
    dispatcher_argv.push_back(absl::StrCat("--max_workers=", max_workers));
    dispatcher_argv.push_back("--provisioned_worker_flags=" + absl::StrJoin(provisioned, " "));
    dispatcher_argv.push_back("--provisioned_worker_log_dir=" + dir + "/logs");
  }
  absl::StatusOr<std::string> dispatcher;
  if (replicas == 1) {
    dispatcher_argv.push_back("--journal_dir=" + dir + "/journal");
    dispatcher_argv.push_back(absl::StrCat("--port=", base_port));
    dispatcher = supervisor.Start("dispatcher", "dispatcher", std::move(dispatcher_argv));
  } else {
    if (max_workers > 0) {
      return fail(absl::InvalidArgumentError(
          "--max_workers is not supported with --replicas yet (a replica has no provisioner)"));
    }
    dispatcher = StartReplicas(supervisor, ca.get(), dir, replicas, base_port, dispatcher_argv);
  }
  if (!dispatcher.ok()) return fail(dispatcher.status());
  const int total =
      max_workers > 0 ? 0 : absl::GetFlag(FLAGS_workers) + absl::GetFlag(FLAGS_cluster_standby);
  for (int i = 0; i < total; ++i) {
    const bool standby = i >= absl::GetFlag(FLAGS_workers);
    const std::string name = absl::StrCat("worker-", i);
    std::vector<std::string> worker = {
        self, "worker", "--dispatcher=" + *dispatcher, "--worker_id=" + name,
        absl::StrCat("--port=", base_port == 0 ? 0 : base_port + replicas + i)};
    if (standby) worker.push_back("--standby");
    const absl::StatusOr<TransportSecurity> worker_security =
        LocalSecurityFor(ca.get(), name, WorkerIdentityUri(name), {host});
    if (!worker_security.ok()) return fail(worker_security.status());
    for (const std::string& flag : TransportSecurityFlags(*worker_security)) {
      worker.push_back(flag);
    }
    worker.insert(worker.end(), worker_flags.begin(), worker_flags.end());
    const absl::StatusOr<std::string> started =
        supervisor.Start("worker", name, std::move(worker), standby ? "standby" : "");
    if (!started.ok()) return fail(started.status());
  }
  if (max_workers > 0) {
    std::printf(
        "workers: started by the dispatcher's local provisioner, %d to %d as the jobs' "
        "tasks want; their logs are %s/logs/worker-*.log\n",
        absl::GetFlag(FLAGS_workers), max_workers, dir.c_str());
  }
  // What `granary run` / `status` (and ClientOptions) need to reach this cluster, as flags and
  // as a client configuration file.
  const absl::StatusOr<std::string> client_config =
      WriteClientConfig(dir, *dispatcher, *client_security);
  if (!client_config.ok()) return fail(client_config.status());
  std::printf("client flags: %s\n",
              absl::StrJoin(TransportSecurityFlags(*client_security), " ").c_str());
  std::printf(
      "client config: %s (granary run|status|precache --config %s; granary.connect(config=...) "
      "in Python)\n",
      client_config->c_str(), client_config->c_str());
  std::printf("cluster ready; logs in %s/logs; Ctrl-C or SIGTERM stops it\n", dir.c_str());
  if (options.restart) {
    std::printf("a process that dies is restarted (--restart); kill -HUP %d restarts at once\n",
                static_cast<int>(::getpid()));
  } else {
    std::printf("a process that dies is reported; kill -HUP %d restarts it\n",
                static_cast<int>(::getpid()));
  }
  std::fflush(stdout);
  supervisor.Run();
  return 0;
}

}  // namespace granary
